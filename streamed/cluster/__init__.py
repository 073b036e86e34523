"""Beyond one machine: a model's layers split into contiguous ranges over a Ray cluster, one actor a range.

In: the document's ``Programs`` (and a bundle's plans), where the weights come from (a checkpoint path every node can
read, or a seed), the tokens or the deployment, and a cluster address. Out: the same ``Logits`` as
``numerics.run`` and the same ``Report`` as ``numerics.verify.run`` — bit for bit, whatever the split — with no node
holding more than its range.

``split`` chooses the ranges from each layer's bytes (``numerics.footprint``) and each actor's memory, or refuses in
one line; ``stage`` is one actor's part (plain Python, no Ray); ``engine`` is the only module that imports Ray: it
places the stages, passes the hidden state along, replays a restarted stage, and stops every actor at the end.
"""
