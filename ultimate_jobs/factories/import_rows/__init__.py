"""``import_rows()``: a file read back into the app's tables a page of bytes at a time.

``declaration`` validates ``import_rows(...)`` and declares its job (the header step, then one step
a page); ``page`` is one page (read at the checkpointed offset, rows checked by the ``Form``, handed
over in batches, refusals reported); ``records`` finds where records end in a page of bytes.
Imports point one way: ``declaration`` -> ``page`` -> ``records``.
"""
