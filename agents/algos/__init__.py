"""Learning algorithms, independent of any one paper: Double DQN (:mod:`.ddqn`), MaskablePPO with the project's
feature extractors (:mod:`.ppo`), parameter sharing of one SB3 policy across a PettingZoo env's agents
(:mod:`.parameter_sharing`), and the policy-gradient core HMARL and MetaPlace share (:mod:`.pg`)."""
