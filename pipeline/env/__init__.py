"""env stage."""
