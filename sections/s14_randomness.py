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
from kauldron import konfig, kontext

from configs import dropout as dropout_config
from harness import Lesson, section
from harness.compare import same
from sections.parts.logs import read_scalars
from sections.parts.regression import make_data

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import randomness as randomness_cfg


@section(14, "randomness", "Randomness and train/eval mode: RNG streams, dropout, who decides the mode", part="for-real", trains=True,
         shows="dropout by mode; RNG streams from the seed; the evaluator's mode; a stream of your own; context key paths",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#rng-streams")
def randomness_and_modes(lesson: Lesson, workdir):
    lesson.md("""
    ## The model reads its mode; whoever applies it sets it

    `configs/dropout.py` (below) trains `DropoutMLP`, which declares `is_training =
    kd.nn.train_property()` and uses `kd.nn.Dropout`, which reads it. `train()` sets it
    on and an evaluator off; outside a Trainer you set it yourself, `model.apply(...,
    is_training_property=...)`: without it, a model that reads it, as this one does,
    raises `ValueError` in `init` and `apply`. In training, dropout needs a key and two
    keys give two outputs; in evaluation it is off.
    """)
    cfg = dropout_config.get_config()
    cfg.workdir = str(workdir / "seed-0")
    trainer = konfig.resolve(cfg)
    params, x = {"params": trainer.init_state().params}, make_data("eval")["x"]
    keys = jax.random.split(jax.random.key(0))
    train_1, train_2 = (trainer.model.apply(params, x, rngs={"dropout": key}, is_training_property=True)["y"]
                        for key in keys)
    evaluated = trainer.model.apply(params, x, is_training_property=False)["y"]
    print(np.asarray(train_1[:3, 0]), np.asarray(train_2[:3, 0]), np.asarray(evaluated[:3, 0]))
    with lesson.checks():
        no_dropout = trainer.model.clone(rate=0.0).apply(params, x, is_training_property=True,
                                                         rngs={"dropout": keys[0]})["y"]
        lesson.check(not np.array_equal(train_1, train_2), "in training mode, two dropout keys give different outputs")
        from flax.errors import InvalidRngError

        lesson.check_raises(InvalidRngError, lambda: trainer.model.apply(params, x, is_training_property=True),
                            "applying the model in training mode without a dropout key")
        lesson.check(np.array_equal(evaluated, no_dropout), "in eval mode, the output is the model's with dropout rate 0")
        for method, call in (("init", lambda: trainer.model.init(trainer.rng_streams.init_rngs(), x)),
                             ("apply", lambda: trainer.model.apply(params, x, rngs={"dropout": keys[0]}))):
            error = lesson.check_raises(ValueError, call, f"the model's {method} without is_training_property=")
            lesson.check("`is_training_property=` kwargs was not set" in str(error),
                         f"{method}'s error says is_training_property= was not set")

    lesson.md("""
    ## RNG streams come from the Trainer's seed

    By default the Trainer hands the model three streams: `params` at initialisation
    only, `dropout` and `default` at initialisation and at every training step (folded
    with the step), and none in evaluation. All derive from `seed`, which also seeds the
    data pipeline's shuffle: the same seed trains to the same parameters, bit for bit on
    the same machine, and another seed draws other keys, other initial parameters and
    another batch order.
    """)
    streams = trainer.rng_streams
    print({"init": sorted(streams.init_rngs()), "train": sorted(streams.train_rngs(0)),
           "eval": sorted(streams.eval_rngs(0))})
    states = {}
    states["seed-0"], _ = trainer.train()  # the Trainer above: seed 0 (configs/regression.py sets it), workdir seed-0
    cfg.workdir = str(workdir / "seed-0-again")
    states["seed-0-again"], _ = konfig.resolve(cfg).train()  # built again from the same config
    cfg.workdir, cfg.seed = str(workdir / "seed-1"), 1
    seed_1 = konfig.resolve(cfg)  # not trained: compared on its initial parameters here, its keys and first batch below

    def equal(a, b) -> bool:  # every array of two trees, bit for bit
        return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    print({"seed 0 again, trained params equal": equal(states["seed-0"].params, states["seed-0-again"].params),
           "seed 1, initial params equal": equal(seed_1.init_state().params, trainer.init_state().params)})
    with lesson.checks():
        lesson.check_equal([sorted(streams.init_rngs()), sorted(streams.train_rngs(0)), sorted(streams.eval_rngs(0))],
                           [["default", "dropout", "params"], ["default", "dropout"], []], "the streams at init, train, eval")
        lesson.check(not same(streams.train_rngs(0)["dropout"], streams.train_rngs(1)["dropout"]),
                     "the dropout key changes from one training step to the next")
        lesson.check_equal((trainer.seed, dropout_config.get_config().get("seed")), (0, 0),
                           "the seed of the Trainer above, and the one its config sets (configs/regression.py)")
        lesson.check(same(states["seed-0"].params, states["seed-0-again"].params), "two runs with seed 0 end bit for bit equal")
        lesson.check(not same(seed_1.rng_streams.train_rngs(0)["dropout"], streams.train_rngs(0)["dropout"]),
                     "with seed 1, the dropout key of step 0 differs from seed 0's")
        lesson.check(not same(seed_1.rng_streams.init_rngs()["params"], streams.init_rngs()["params"])
                     and not same(seed_1.init_state().params, trainer.init_state().params),
                     "with seed 1, the params key and the initial parameters differ from seed 0's")
        lesson.check(not same(next(iter(seed_1.train_ds))["x"], next(iter(trainer.train_ds))["x"]),
                     "with seed 1, the pipeline's first batch differs from seed 0's")

    lesson.md("""
    ## `train()` trains the model; the evaluator evaluates it

    The model also records the mode it ran in (`interms.is_training[0]`), and a metric
    averages it: 1 in `train/`, 0 in `eval/`. So the evaluator's loss is the eval-mode
    model's, without dropout. The run's evaluation at step 20, its last, saw the state
    before that step's update (the loop runs steps 0 to 20: 21 updates): here the
    evaluator is run again on the final state, and a check below recomputes its loss with
    numpy, the model in eval mode.
    """)
    last = dropout_config.STEPS
    flags = {name: read_scalars(workdir / "seed-0", name)[last]["metrics/is_training"] for name in ("train", "eval")}
    # Logged as step 21, after the run's own evaluation of step 20 rather than over it.
    final = trainer.evals["eval"].evaluate(states["seed-0"], last + 1).compute().loss_values["losses/logcosh"]
    print(flags, float(final))
    with lesson.checks():
        lesson.check_equal(flags, {"train": 1.0, "eval": 0.0}, "the mode the model saw, averaged at the last step")
        lesson.check_equal(sorted(read_scalars(workdir / "seed-0", "eval")), [0, last, last + 1],
                           "the steps eval/ logged: EveryNSteps(20) in a run of num_train_steps=20, then the evaluation above")
        at_20 = read_scalars(workdir / "seed-0", "eval")[last]["losses/logcosh"]
        lesson.check(abs(at_20 - float(final)) > 1e-4 * float(final),
                     "the run's evaluation at step 20 differs from the final state's: it saw the state before step 20's"
                     " update")
        lesson.check_close(float(final), eval_mode_loss(trainer, states["seed-0"]),
                           "the evaluator's loss of the final state = numpy's, model in eval mode", rel=1e-5)

    lesson.md("""
    ## A stream of your own

    `NoisyMLP` draws noise from a stream called `noise`. The Trainer provides it once it
    is listed: `kd.train.RngStreams([kd.train.RngStream("noise", eval=True)])`. Listed
    streams are added to the three defaults; a listed stream with a default's name (such
    as `dropout`) replaces that default. Unlisted, the model still initialises (Flax
    falls back on the `params` stream), and its first training step raises Flax's
    `InvalidRngError`. A stream is off in evaluation unless `eval=True`. In evaluation
    its keys are folded with the eval batch's index, not the training step, so every
    evaluation draws the same noise.
    """)
    cfg = dropout_config.get_config()
    cfg.workdir = str(workdir / "noise")
    cfg.model = randomness_cfg.NoisyMLP(inputs="batch.x")
    cfg.rng_streams = kd_cfg.train.RngStreams([kd_cfg.train.RngStream("noise", eval=True)])
    cfg.train_metrics = {"noise_mean": randomness_cfg.Average(values="interms.noise_mean[0]")}
    cfg.evals["eval"] = kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(last // 2))  # 3 evaluations, to compare
    noisy = konfig.resolve(cfg)
    noisy.train()
    noise = {name: {step: round(row["metrics/noise_mean"], 6) for step, row in read_scalars(workdir / "noise", name).items()}
             for name in ("train", "eval")}
    print(noise)
    with lesson.checks():
        lesson.check(len(set(noise["train"].values())) == len(noise["train"]) == 3,
                     "in training, each of the 3 logged steps drew new noise")
        lesson.check(len(noise["eval"]) == 3 and len(set(noise["eval"].values())) == 1, "the 3 evaluations drew the same noise")
        from kauldron import kd

        lesson.check_equal([sorted(kd.train.RngStreams([kd.train.RngStream("noise", eval=e)], seed=0).eval_rngs(0))
                            for e in (False, True)], [[], ["noise"]],
                           "the streams eval_rngs gives with RngStream('noise'), then with eval=True")
        lesson.check_equal(sorted(noisy.rng_streams.train_rngs(0)), ["default", "dropout", "noise"],
                           "the streams of the noise Trainer's training steps: noise added to the defaults")
        lesson.check_equal(sorted(kd.train.RngStreams([kd.train.RngStream("dropout", eval=True)], seed=0).eval_rngs(0)),
                           ["dropout"], "the streams eval_rngs gives with RngStream('dropout', eval=True): it replaced"
                           " the default dropout, off in evaluation")
        logged = [row["metrics/noise_mean"] for row in read_scalars(workdir / "noise", "eval").values()]
        by_batch_index = eval_noise_mean(noisy, lambda i: noisy.rng_streams.eval_rngs(i))
        lesson.check(all(np.isclose(value, by_batch_index, rtol=1e-5, atol=0) for value in logged),
                     "each evaluation's logged noise_mean = NoisyMLP's over the eval batches i = 0..3, keys eval_rngs(i)")
        lesson.check(not np.isclose(by_batch_index, eval_noise_mean(noisy, lambda i: noisy.rng_streams.eval_rngs(0)),
                                    rtol=1e-3, atol=0),
                     "that differs from the noise with batch 0's key on every batch")
        import dataclasses

        from flax.errors import InvalidRngError

        from sections.parts.randomness import NoisyMLP

        unlisted = dataclasses.replace(trainer, model=NoisyMLP(inputs="batch.x"), train_metrics={})  # default streams
        lesson.check_equal(sorted(unlisted.state_specs.params), ["enc", "out"],
                           "the layers that Trainer's init_state() gives, traced (state_specs), with noise unlisted")
        error = lesson.check_raises(InvalidRngError, lambda: unlisted.context_specs,
                                    "tracing a training step of that Trainer (context_specs)")
        lesson.check('needs PRNG for "noise"' in str(error), "the error names the stream noise")

    lesson.md("""
    ## Going further: which key paths a loss or a metric can name

    `trainer.context_specs` describes everything one training step builds; flattened, it
    lists its key paths. A training metric or summary reads the context after the
    gradients and updates are computed: `grads.*`, `updates.*` and the losses' states
    included (its `params` and `opt_state` are those before the update). A loss runs
    earlier, inside the gradient: it sees only `step`, `batch`, `params`, `collections`,
    `opt_state`, `preds` and `interms`. In an evaluator, which runs no backward pass, both
    see only these seven: no `grads`, no `updates`, and no losses' states either.
    `train()` writes the same table to TensorBoard as `context_spec`, with two more rows,
    `grads` and `updates`, that say they have the parameters' structure.
    """)
    paths = etree.spec_like(kontext.flatten_with_path(trainer.context_specs))
    for path in ("batch.x", "preds.y", "interms.is_training[0]", "params.out.kernel", "grads.out.kernel"):
        print(f"{path:24} {paths[path]}")
    with lesson.checks():
        from sections.parts.logs import read_tensors

        table = read_tensors(workdir / "seed-0", "train")["context_spec"][0].item().decode()
        lesson.check({"batch.x", "batch.y", "preds.y", "interms.is_training[0]"} <= set(paths),
                     "the key paths this lesson's model, loss and metric use are all listed")
        rows = {line.split("`")[1]: line.split("`")[3] for line in table.splitlines() if line.startswith("| `")}
        lesson.check(rows.keys() == set(paths) | {"grads", "updates"} and len(rows) == len(paths) + 2
                     and rows["grads"] == rows["updates"] == "<<same structure as params>>",
                     "TensorBoard's context_spec: a row per flattened path, and rows grads and updates: same structure as params")
        import dataclasses

        seen = {}
        probing = dataclasses.replace(trainer, train_losses={**trainer.train_losses, "probe": context_probe(seen, "loss")},
                                      train_metrics={**trainer.train_metrics, "probe": context_probe(seen, "metric")})
        probing.context_specs  # traces one training step: each probe records the context it was given
        fields_set = {label: sorted(f.name for f in dataclasses.fields(context) if getattr(context, f.name) is not None)
                      for label, context in seen.items()}
        loss_sees = {"step", "batch", "params", "collections", "opt_state", "preds", "interms"}
        lesson.check_equal(fields_set, {"loss": sorted(loss_sees), "metric": sorted(loss_sees | {"grads", "updates", "loss_states", "loss_total"})},
                           "the context fields set when a training step calls a loss, and a metric",
                           internal="a loss and a metric that override get_state_from_context, the hook the step calls")
        evaluator = dataclasses.replace(trainer.evals["eval"], losses={"probe": context_probe(seen, "eval loss")},
                                        metrics={"probe": context_probe(seen, "eval metric")})
        batch = next(iter(evaluator.ds_iter))
        jax.eval_shape(lambda state, batch: evaluator.step(step_nr=0, state=state, batch=batch), states["seed-0"], batch)
        lesson.check_equal({label: sorted(f.name for f in dataclasses.fields(seen[label]) if getattr(seen[label], f.name) is not None)
                            for label in ("eval loss", "eval metric")},
                           {"eval loss": sorted(loss_sees), "eval metric": sorted(loss_sees)},
                           "the context fields set when an evaluator's step calls a loss, and a metric: a training loss's seven",
                           internal="a loss and a metric that override get_state_from_context, the hook the step calls")
        from sections.parts.randomness import Average

        reading = dataclasses.replace(trainer, train_metrics={"kernel": Average(values="params.out.kernel"),
                                                              "count": Average(values="opt_state[0].count")})
        before = jax.tree.map(np.array, states["seed-0"])  # a copy: the step donates its input
        after, aux = reading.trainstep.step(before, jax.device_put(next(iter(reading.train_ds)), reading.sharding.batch),
                                            return_metrics=True)
        read = {name: float(aux.metric_states[name].compute()) for name in ("kernel", "count")}
        lesson.check_equal((read["count"], int(after.opt_state[0].count)), (last + 1, last + 2),
                           "adam's count a metric reads in a real step, and the count after that step")
        kernel_mean = {name: float(np.mean(state.params["out"]["kernel"])) for name, state in (("before", before), ("after", after))}
        lesson.check(np.isclose(read["kernel"], kernel_mean["before"], rtol=1e-5, atol=0)
                     and not np.isclose(read["kernel"], kernel_mean["after"], rtol=1e-3, atol=0),
                     "the out kernel's mean a metric reads in that step: the state's before the update, not after")
        lesson.fact("context_paths", len(paths))
        lesson.summary = (f"dropout by mode; seed 0 reproduced a run of {last + 1} updates bit for bit;"
                          " a noise stream of its own, same in each eval")


def context_probe(seen: dict, label: str):
    """A loss (or metric) of 0 that records, in `seen[label]`, the context it is called
    with: what a loss or a metric can read at that point."""
    import dataclasses

    import jax.numpy as jnp
    from kauldron import kd

    @dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
    class ContextProbe(kd.losses.Loss):
        def get_values(self):
            return jnp.zeros(())

        def get_state_from_context(self, context):
            seen[label] = context
            return self.State.from_values(jnp.zeros(()))

    return ContextProbe()


def eval_mode_loss(trainer, state) -> float:
    """logcosh over the held-out rows with the model in evaluation mode, by numpy."""
    data = make_data("eval")
    preds = trainer.model.apply({"params": state.params}, data["x"], is_training_property=False)["y"]
    return float(np.mean(np.log(np.cosh(np.asarray(preds) - data["y"]))))


def eval_noise_mean(trainer, keys_for) -> float:
    """NoisyMLP's noise_mean averaged over the eval batches, batch i drawn with the keys
    `keys_for(i)`: what the Evaluator logs if it passes those keys (the noise depends on
    the key and the batch's shape, not on the parameters)."""
    x, size = make_data("eval")["x"], trainer.evals["eval"].ds.batch_size
    params = {"params": trainer.model.init(trainer.rng_streams.init_rngs(), x[:size])["params"]}  # any will do
    means = [trainer.model.apply(params, x[start:start + size], rngs=keys_for(start // size),
                                 mutable=["intermediates"])[1]["intermediates"]["noise_mean"][0]
             for start in range(0, len(x), size)]
    return float(np.mean(means))
