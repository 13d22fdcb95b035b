"""Time-dependent two-phase flow: MAC grid, level set, projection."""
