"""The policy and registry in force: the engine held, followed, published, and what each principal may see."""
