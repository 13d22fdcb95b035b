"""bubbleflow."""
