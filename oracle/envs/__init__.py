"""One module per oracle environment; `oracle.inventory` names them in serving order."""
