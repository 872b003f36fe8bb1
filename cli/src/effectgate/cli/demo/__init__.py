"""The scripted demo, and its chat variant."""
