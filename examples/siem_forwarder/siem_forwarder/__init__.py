"""An example consumer of the read-only auditor's export: the audit record as JSON lines for a SIEM."""
