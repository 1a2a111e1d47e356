"""records stage."""
