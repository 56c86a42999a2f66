"""The reference data (C3): the fixed lists, the gazetteer and place resolution."""
