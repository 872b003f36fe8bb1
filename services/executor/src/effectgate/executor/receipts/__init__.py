"""What leaves the executor: receipts fitted to one message, scrubbed, naming the approval they waited on."""
