"""Checks of a whole stack that look across capabilities, run once when the stack file is read."""
