"""``advise``: measured changes that make a network use the GPU better. Exact rewrites that leave what it computes
unchanged (channel padding to the tensor cores' multiple: ``padding``, on ``channel_graph``, ``solve`` and
``layout``; BatchNorm folding: ``measure.backends.fold_batchnorm``; both checked in ``rewrites``) and deployment
choices, each measured from the model as given and ranked (``advisor``)."""
