"""The regression experiment with dropout (section 14).

`DropoutMLP` applies dropout after its encoder and records the mode it ran in, which a
metric averages; one evaluator, every `STEPS` steps (so at step 0 and at step `STEPS`, the
loop's last, on the state before that step's update), reuses the training loss and metric.

    python -m kauldron.main --cfg=configs/dropout.py --cfg.workdir=/absolute/path
"""

from kauldron import konfig

from configs import regression as regression_config

with konfig.imports():
    from kauldron import kd

    from sections.parts import regression
    from sections.parts import randomness

STEPS = 20


def get_config():
    cfg = regression_config.get_config()
    cfg.num_train_steps = STEPS
    cfg.model = randomness.DropoutMLP(inputs="batch.x", rate=0.5)
    cfg.train_metrics = {"is_training": randomness.Average(values="interms.is_training[0]")}
    cfg.eval_ds = kd.data.InMemoryPipeline(loader=regression.make_loader("eval"), batch_size=32, num_epochs=1)
    # An evaluator given no data, losses or metrics evaluates cfg.eval_ds with the training ones.
    cfg.evals = {"eval": kd.evals.Evaluator(run=kd.evals.EveryNSteps(STEPS))}
    return cfg
