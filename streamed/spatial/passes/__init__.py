"""The lowering passes, one module each, in the order they run on one authored program:

    lift  →  split_tp (tensor parallel only)  →  fold_q8  →  tile  →  place  →  certify

and what they share: ``errors`` (``LoweringError``, ``TPError``: a refusal with its statement and binder),
``shapes`` (an op's output shapes, ``infer``, and its FLOPs, ``flops_of``), ``footprint`` (what a program holds on
chip, and the refusal, with numbers, for every limit of the target it exceeds) and ``cost`` (what a step moves per
tier and computes: ``traffic``, ``step_cost``). They read and write the IR of ``streamed.spatial.ir``;
``streamed.spatial.lower`` runs them for one program (``lower_program``).

Each module's docstring says what goes in, what comes out and the invariant it keeps. Every pass is a pure function
of its inputs; cost is linear in the program, never in the model's depth (the tile pass lowers the program again at
a logarithmic number of tile sizes).
"""
