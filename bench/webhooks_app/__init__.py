"""The webhook benchmark's app: its ``jobs`` module declares the delivery the workers run."""
