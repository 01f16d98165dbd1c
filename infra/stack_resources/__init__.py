"""Every resource a stack creates, planned as data (see stack.py)."""
