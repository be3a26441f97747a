"""The eval stage: a checkpoint's loss and bits per byte on any text or a data directory's
validation split, and its accuracy on multiple-choice sets (HellaSwag, or your own) scored as
llm.c scores HellaSwag. The trainer's validation uses the same code (train/evaluate.py)."""
