"""The transport-agnostic run engine: admission, run lifecycle, the signal translator, cancellation."""
