"""What ``config check`` finds in a configuration and its references."""
