"""Randomness and train/eval mode: RNG streams, dropout, and who decides the mode.

A Trainer hands the model named RNG streams (`rng_streams`): by default `params` (at
initialisation only), `dropout` and `default` (at initialisation and every training
step, folded with the step), and none at all in evaluation. All of them derive from the
Trainer's `seed`. The model does not take a `deterministic` argument threaded by hand: it
reads `self.is_training`, a `kd.nn.train_property()`, which whoever applies it sets:
`train()` sets it on, the evaluator off, and outside a Trainer you pass
`model.apply(..., is_training_property=True/False)`. `kd.nn.Dropout` reads it itself.

To see which values a loss or a metric can name by key path, list the Trainer's context:
`trainer.context_specs` describes everything one train step builds, and
`kontext.flatten_with_path` turns it into the key paths (the same table `train()` writes
to TensorBoard as `context_spec`).
"""


import jax
import numpy as np
from etils import etree
from kauldron import konfig, kontext

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import event_files, make_data, read_scalars

STEPS = 50


def experiment(workdir, seed: int = 0, rate: float = 0.5):
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections.parts import dropout as dropout_cfg
        from sections import shared as shared_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.seed, cfg.num_train_steps = str(workdir), seed, STEPS
    cfg.model = dropout_cfg.DropoutMLP(inputs="batch.x", rate=rate)
    cfg.train_metrics = {"is_training": dropout_cfg.Average(values="interms.is_training[0]")}
    cfg.eval_ds = kd_cfg.data.InMemoryPipeline(loader=shared_cfg.make_loader("eval"), batch_size=32, num_epochs=1)
    cfg.evals = {"eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(STEPS))}  # the train losses and metrics
    return konfig.resolve(cfg)


def same(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def check_the_modes(lesson: Lesson, trainer) -> None:
    params = {"params": trainer.init_state().params}
    x = make_data("eval")["x"]
    model = trainer.model
    keys = jax.random.split(jax.random.key(0))
    train_1, train_2 = (model.apply(params, x, rngs={"dropout": k}, is_training_property=True)["y"] for k in keys)
    eval_1, eval_2 = (model.apply(params, x, is_training_property=False)["y"] for _ in range(2))
    no_dropout = model.clone(rate=0.0).apply(params, x, is_training_property=True, rngs={"dropout": keys[0]})["y"]
    lesson.check(not np.array_equal(train_1, train_2), "in training mode, two dropout keys give different outputs")
    lesson.check(np.array_equal(eval_1, eval_2), "in eval mode, the output is the same call after call, with no key")
    lesson.check(np.array_equal(eval_1, no_dropout), "in eval mode, the output is the model's with dropout rate 0")
    print("  model.apply(..., is_training_property=True, rngs={'dropout': key}): two keys, two different outputs"
          "\n  model.apply(..., is_training_property=False): the same output every call, equal to rate 0's")


def check_streams(lesson: Lesson, trainer) -> None:
    streams = trainer.rng_streams
    names = {"init": sorted(streams.init_rngs()), "train": sorted(streams.train_rngs(0)), "eval": sorted(streams.eval_rngs(0))}
    print(f"\n  rng streams: at init {names['init']}, each training step {names['train']}, in evaluation {names['eval']}")
    lesson.check_equal(names, {"init": ["default", "dropout", "params"], "train": ["default", "dropout"], "eval": []},
                       "the default RNG streams at init, at a training step and in evaluation")
    lesson.check(not same(streams.train_rngs(0)["dropout"], streams.train_rngs(1)["dropout"]),
                 "the dropout key changes from one training step to the next")


def check_seeds(lesson: Lesson, runs: dict) -> None:
    (a, _), (b, _), (c, _) = runs.values()
    lesson.check(same(a.params, b.params), f"two {STEPS}-step runs with seed 0 end with the same parameters, bit for bit")
    lesson.check(not same(a.params, c.params), "a run with seed 1 ends elsewhere")
    print(f"\n  {STEPS} steps with dropout: seed 0 twice -> identical parameters; seed 1 -> different ones")


def check_the_evaluator(lesson: Lesson, workdir, trainer, state) -> None:
    train_log, eval_log = (read_scalars(*event_files(workdir, name)) for name in ("train", "eval"))
    flags = {"train": train_log[STEPS]["metrics/is_training"], "eval": eval_log[STEPS]["metrics/is_training"]}
    print(f"\n  the model's recorded mode, averaged by a metric at step {STEPS}: {flags['train']} in train/,"
          f" {flags['eval']} in eval/")
    lesson.check_equal(flags, {"train": 1.0, "eval": 0.0}, "the mode the model saw: training in train(), eval in the evaluator")
    data = make_data("eval")
    preds = trainer.model.apply({"params": state.params}, data["x"], is_training_property=False)["y"]
    by_hand = float(np.mean(np.log(np.cosh(np.asarray(preds) - data["y"]))))
    final = trainer.evals["eval"].evaluate(state, STEPS + 1).compute()
    lesson.check_close(float(final.loss_values["losses/logcosh"]), by_hand,
                       "the evaluator's loss = numpy's logcosh of the model in eval mode (no dropout)", rel=1e-5)


def check_context_keys(lesson: Lesson, trainer) -> None:
    paths = etree.spec_like(kontext.flatten_with_path(trainer.context_specs))
    print("\n  etree.spec_like(kontext.flatten_with_path(trainer.context_specs)), a few of its key paths:")
    for path in ("batch.x", "preds.y", "interms.enc.__call__[0]", "interms.is_training[0]", "params.out.kernel",
                 "grads.out.kernel", "loss_states.logcosh.value"):
        print(f"    {path:28} {paths.get(path)}")
    used = ["batch.x", "batch.y", "preds.y", "interms.is_training[0]"]
    lesson.check(all(path in paths for path in used),
                 f"the key paths this lesson's model, loss and metric use are all listed: {', '.join(used)}")
    lesson.fact("context_paths", len(paths))


@section(14, "randomness", "Randomness and train/eval mode: RNG streams, dropout, who decides the mode", trains=True,
         shows="RNG streams from the seed; dropout on in training, off in eval; the evaluator's mode; context key paths",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#rng-streams")
def randomness_and_modes(lesson: Lesson) -> str:
    runs = {}
    for name, seed in (("seed-0", 0), ("seed-0-again", 0), ("seed-1", 1)):
        trainer = experiment(lesson.workdir / name, seed=seed)
        runs[name] = trainer.train()
    trainer = experiment(lesson.workdir / "seed-0")
    check_the_modes(lesson, trainer)
    check_streams(lesson, trainer)
    check_seeds(lesson, runs)
    check_the_evaluator(lesson, lesson.workdir / "seed-0", trainer, runs["seed-0"][0])
    check_context_keys(lesson, trainer)
    return (f"dropout differs per key in training, is off in eval; seed 0 reproduced a {STEPS}-step run bit for bit;"
            " the evaluator ran in eval mode")
