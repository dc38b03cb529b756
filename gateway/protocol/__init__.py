"""AG-UI wire types (msgspec): the run input with the iacCode extension, and the events the gateway emits."""
