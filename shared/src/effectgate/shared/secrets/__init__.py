"""Secret detection and redaction: detectors, key=value credentials, invisible characters, scrubbed logs."""
