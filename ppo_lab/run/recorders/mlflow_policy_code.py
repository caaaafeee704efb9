"""The code of the pyfunc policy model ("models from code": MLflow runs this file to load it)."""

from mlflow.models import set_model

from ppo_lab.run.recorders.mlflow_policy import PolicyModel

set_model(PolicyModel())
