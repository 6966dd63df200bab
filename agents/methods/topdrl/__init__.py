"""TopDRL (Ayadi, An et al., JPDC 2025): the multi-branch CNN job selector with the closest placer (:mod:`.agent`)."""
