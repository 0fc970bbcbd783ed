"""User and project profiles (layer 3), built from active memory items."""
