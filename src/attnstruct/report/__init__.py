"""How a result is shown: :mod:`.plotting` (one figure style, byte-identical figure files), :mod:`.prose` (numbers
rendered as words, the one signed-number format) and :mod:`.progress` (progress bars a batch run switches off)."""
