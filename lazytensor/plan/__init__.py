"""Expression -> steps: lowering to kernel programs, the table of heavy ops and their builders, the CBR patterns, the steps."""
