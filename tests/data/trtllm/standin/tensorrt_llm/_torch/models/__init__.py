"""STAND-IN: importing the real package registers every model class (register_auto_model)."""
