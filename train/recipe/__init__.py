"""The default recipe: a model, batch and schedule sized for the corpus, the time budget and
the device the run has.

`train` without --config and without --model trains with the recipe's settings (flags still
win). A preset is sized for a machine and a corpus that may not be the user's: the `tiny` preset
(3.7M parameters, 16 x 256 tokens a step) does ~140 steps in 2 minutes of a 2-core CPU, far too
few to learn much, and a 0.8M-parameter character model doing 2,000 steps in those minutes beat
it. What counts on a budget is how many steps it buys, and that depends on the machine as it is
now: the same CPU trains 2.7x slower beside two busy processes (bench/threads.py). So the recipe
times a few training steps of each shape of a ladder on the run's own device (the CPU with the
threads the load allows, or the GPU), climbing from the smallest, and takes the largest shape
that still trains on enough tokens for its size (ladder.TOKENS_PER_PARAM, per parameter outside the
embedding) in the budget; more time buys a bigger model, never a smaller one. The corpus sets a
ceiling: more parameters than ladder.MAX_PARAMS_PER_TOKEN per training token only memorize it.

Timing is done on the model uncompiled: where the run compiles it (CUDA) the run is faster than
timed, and --max-time plans the steps from the run's own throughput in any case.

bench/recipe.py measures the recipe against a nanoGPT-style char model in the same minutes, and
bench/time_budget.py the same run on an idle and on a busy machine.

One concern a module:

    settings.py   recipe_settings(): the recipe's layer of a run's settings, and the Recipe it made
    ladder.py     the ladder of shapes and the climb that chooses one (choose), dropout included
    timing.py     a few timed training steps of each shape on the run's device
    repeats.py    how far back the corpus repeats itself: the context it asks for
    trials.py     the vocabularies tried (cuts of the data's tokenizer) by successive halving
    report.py     what the recipe says of its choice: the run's first lines and metrics.jsonl's record
"""
