"""Unit tests of the scheduling core, one module per component."""
