"""preflight stage."""
