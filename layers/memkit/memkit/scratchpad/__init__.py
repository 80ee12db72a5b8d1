"""The scratchpad: formats, merge rules, schema checks, the prompt block and agent tools."""
