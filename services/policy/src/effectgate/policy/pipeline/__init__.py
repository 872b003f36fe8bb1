"""The steps of one decision: intake, screening, the replay and rate gate, admission, re-checks."""
