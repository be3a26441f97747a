"""The train stage: a resumable, distributed trainer from token shards to checkpoints.

As a library:

    from gptkit.train.config import TrainConfig
    from gptkit.train.run import train

    config = TrainConfig.of(data="out/stories", out="runs/stories", model="tiny", max_steps=200)
    steps = train(config)                                      # a new run
    train(config.replace(max_steps=400), resume=True)          # the same run, longer

A run, top to bottom:

    config.py        the settings: TrainConfig, one frozen section per concern (sections.py: job,
                     batch, length, optim, ...), checked when made; TrainConfig.of(**flat) and
                     to_dict() for the flat form of flags, presets and config.json; each setting
                     declared once, at its field (setting.py)
    settle.py        settle(config, resume, dist, threads) -> Run: the one place that completes the
                     settings (the recipe, --init-from's model, the defaults), resolves the model for
                     the data, and opens and checks the data and the checkpoint a run starts from;
                     prepared.py holds the Run it makes, which the trainer builds its components from
    run.py           train(config): the processes, the output lock, settle, then Trainer(run).fit()
    trainer.py       the loop; each component gets its own section and what follows from it:
      parallel.py      the model as the processes hold it (DDP or FSDP2, fsdp.py; LoRA's adapters on it,
                       model/lora/) and its optimizers (optim.py)
      budget.py        the run's length and schedule (schedule.py); a timed run's plans (Planner, TimeBudget)
      evaluate.py      validation loss and HellaSwag
      checkpointing.py what a checkpoint holds, written whole or not at all (save_checkpoint);
                       checkpoint_read.py reads one back checked
      report.py        log lines and their metrics.jsonl records; trackers.py sends them on
    recipe/          the settings chosen for the data, the budget and the device, where no model is given
    resume.py        a resume checked against the run it goes on
    run_dir.py       the run directory: config.json, metrics.jsonl
    data.py          the batches (Loader); processes.py this process's place (Dist); launch.py torchrun's agent
    cli.py           `gptkit train`: one flag per setting; plot.py `gptkit train plot`
"""
