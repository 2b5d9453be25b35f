"""MLflow: everything golden-sweep writes to it and reads from it. Import from the modules:

- `store`: which store, opening it, experiments, searching runs;
- `lifecycle`: a run's life, ending it KILLED or FAILED, the runs a dead process left RUNNING;
- `records`: a trial's record saved as a run (`trial_run`, `save_record`) and read back (`load_record`);
- `reading`: runs and their artifacts read back, the best finished run by a metric;
- `sweeps`: a sweep's parent run, resuming it, its children, closing it with its leaderboard;
- `digests`: the data digests (what a run was scored on) and which runs they pair;
- `resolve`: which runs a run id, `best` or a sweep's id stands for (`sweep.compare`, `sweep.check`);
- `legacy`: the `_target_` paths of runs logged before the subpackages.

MLflow's import alone takes about 2 s: a module imports it where it needs it, so that reading a
record's tags does not pay for it. No statistics here: the leaderboard is `sweep.evaluation`'s.
"""
