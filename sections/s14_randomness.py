"""Randomness and train/eval mode: RNG streams, dropout, and who decides the mode.

A Kauldron model does not take a `deterministic` argument threaded through by hand, and
it does not make its own random keys. It reads its mode from a property that whoever
applies it sets, and it draws keys from named RNG streams that the Trainer derives from
its `seed`. So a run is reproduced by its seed, and an evaluator runs the model as
evaluation, without anyone remembering to say so.
"""

import jax
import numpy as np
from etils import etree
from kauldron import kd, konfig, kontext

from configs import dropout
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import eval_mode_loss, same
from sections.shared import event_files, make_data, read_scalars, read_tensors

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import randomness as randomness_cfg

STEPS = dropout.STEPS


@section(14, "randomness", "Randomness and train/eval mode: RNG streams, dropout, who decides the mode", part="for-real", trains=True,
         shows="dropout by mode; RNG streams from the seed; the evaluator's mode; a stream of your own; context key paths",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#rng-streams")
def randomness_and_modes(lesson: Lesson) -> str:
    lesson.md("""
    ## The model reads its mode; whoever applies it sets it

    `configs/dropout.py` (below) trains `DropoutMLP`, which declares `is_training =
    kd.nn.train_property()` and uses `kd.nn.Dropout`, which reads it. `train()` sets it
    on and an evaluator off; outside a Trainer, `model.apply(..., is_training_property=...)`
    does. In training, dropout needs a key and two keys give two outputs; in evaluation it
    is off.
    """)
    trainer = konfig.resolve(dropout_experiment(lesson.workdir / "seed-0", seed=0))
    params, x = {"params": trainer.init_state().params}, make_data("eval")["x"]
    keys = jax.random.split(jax.random.key(0))
    train_1, train_2 = (trainer.model.apply(params, x, rngs={"dropout": k}, is_training_property=True)["y"] for k in keys)
    evaluated = trainer.model.apply(params, x, is_training_property=False)["y"]
    print(np.asarray(train_1[:3, 0]), np.asarray(train_2[:3, 0]), np.asarray(evaluated[:3, 0]))
    no_dropout = trainer.model.clone(rate=0.0).apply(params, x, is_training_property=True, rngs={"dropout": keys[0]})["y"]
    lesson.check(not np.array_equal(train_1, train_2), "in training mode, two dropout keys give different outputs")
    lesson.check(np.array_equal(evaluated, no_dropout), "in eval mode, the output is the model's with dropout rate 0")

    lesson.md("""
    ## RNG streams come from the Trainer's seed

    By default the Trainer hands the model three streams: `params` at initialisation
    only, `dropout` and `default` at initialisation and at every training step (folded
    with the step), and none in evaluation. All derive from `seed`: the same seed trains
    to the same parameters, bit for bit, and another seed does not.
    """)
    streams = trainer.rng_streams
    print({"init": sorted(streams.init_rngs()), "train": sorted(streams.train_rngs(0)), "eval": sorted(streams.eval_rngs(0))})
    runs = {name: konfig.resolve(dropout_experiment(lesson.workdir / name, seed)).train()[0]
            for name, seed in (("seed-0", 0), ("seed-0-again", 0), ("seed-1", 1))}
    lesson.check_equal([sorted(streams.init_rngs()), sorted(streams.train_rngs(0)), sorted(streams.eval_rngs(0))],
                       [["default", "dropout", "params"], ["default", "dropout"], []], "the streams at init, train, eval")
    lesson.check(not same(streams.train_rngs(0)["dropout"], streams.train_rngs(1)["dropout"]),
                 "the dropout key changes from one training step to the next")
    lesson.check(same(runs["seed-0"].params, runs["seed-0-again"].params), "two runs with seed 0 end bit for bit equal")
    lesson.check(not same(runs["seed-0"].params, runs["seed-1"].params), "a run with seed 1 ends elsewhere")

    lesson.md("""
    ## `train()` trains the model; the evaluator evaluates it

    The model also records the mode it ran in (`interms.is_training[0]`), and a metric
    averages it: 1 in `train/`, 0 in `eval/`. So the evaluator's loss is the eval-mode
    model's, without dropout.
    """)
    flags = {name: read_scalars(*event_files(lesson.workdir / "seed-0", name))[STEPS]["metrics/is_training"]
             for name in ("train", "eval")}
    final = trainer.evals["eval"].evaluate(runs["seed-0"], STEPS + 1).compute().loss_values["losses/logcosh"]
    print(flags, float(final))
    lesson.check_equal(flags, {"train": 1.0, "eval": 0.0}, "the mode the model saw, averaged at the last step")
    lesson.check_close(float(final), eval_mode_loss(trainer, runs["seed-0"]),
                       "the evaluator's loss of the final state = numpy's, model in eval mode", rel=1e-5)

    lesson.md("""
    ## A stream of your own

    `NoisyMLP` draws noise from a stream called `noise`. The Trainer provides it once it
    is listed: `kd.train.RngStreams([kd.train.RngStream("noise", eval=True)])`. A stream
    is off in evaluation unless `eval=True`. There its keys are folded with the batch's
    index, not the training step, so every evaluation draws the same noise.
    """)
    cfg = dropout_experiment(lesson.workdir / "noise", seed=0)
    cfg.model = randomness_cfg.NoisyMLP(inputs="batch.x")
    cfg.rng_streams = kd_cfg.train.RngStreams([kd_cfg.train.RngStream("noise", eval=True)])
    cfg.train_metrics = {"noise_mean": randomness_cfg.Average(values="interms.noise_mean[0]")}
    cfg.evals["eval"] = kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(STEPS // 2))
    konfig.resolve(cfg).train()
    noise = {name: {step: round(row["metrics/noise_mean"], 6) for step, row in
                    read_scalars(*event_files(lesson.workdir / "noise", name)).items()} for name in ("train", "eval")}
    print(noise)
    lesson.check(len(set(noise["train"].values())) == len(noise["train"]), "in training, each logged step drew new noise")
    lesson.check(len(noise["eval"]) == 3 and len(set(noise["eval"].values())) == 1, "the 3 evaluations drew the same noise")
    lesson.check(kd.train.RngStream("noise").eval is False, "a stream is off in evaluation by default")

    lesson.md("""
    ## Which key paths a loss or a metric can name

    `trainer.context_specs` describes everything one training step builds; flattened, it
    is every key path a loss, metric or summary can read. `train()` writes the same table
    to TensorBoard as `context_spec`, with two more rows, `grads` and `updates`, that say
    they have the parameters' structure.
    """)
    paths = etree.spec_like(kontext.flatten_with_path(trainer.context_specs))
    for path in ("batch.x", "preds.y", "interms.is_training[0]", "params.out.kernel", "grads.out.kernel"):
        print(f"{path:24} {paths[path]}")
    table = read_tensors(lesson.workdir / "seed-0", "train")["context_spec"][0].item().decode()
    lesson.check({"batch.x", "batch.y", "preds.y", "interms.is_training[0]"} <= set(paths),
                 "the key paths this lesson's model, loss and metric use are all listed")
    lesson.check("`grads.out.kernel`" in table and table.count("<<same structure as params>>") == 2,
                 "TensorBoard's context_spec lists grads.* rows, and rows grads and updates: same structure as params")
    lesson.fact("context_paths", len(paths))
    return f"dropout by mode; seed 0 reproduced a {STEPS}-step run bit for bit; a noise stream of its own, same in each eval"


def dropout_experiment(workdir, seed: int):
    """configs/dropout.py, run in `workdir` with `seed`."""
    cfg = dropout.get_config()
    cfg.workdir, cfg.seed = str(workdir), seed
    return cfg
