"""One effect, at most once: the claim, the run under its timeout, the permission and content checks, unsealing."""
