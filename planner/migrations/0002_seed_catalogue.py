"""Seed the catalogue from planner/data/catalogue.toml. Idempotent and never overwrites: a row
that exists (by name, or model+GPU+TP for a run, class+TP range for an efficiency) is left as
an operator may have edited it."""

from typing import Any

from django.db import migrations

from planner.catalogue import load_catalogue


def seed(apps: Any, schema_editor: Any) -> None:
    data = load_catalogue()
    Gpu = apps.get_model("planner", "Gpu")
    ModelCard = apps.get_model("planner", "ModelCard")
    Measurement = apps.get_model("planner", "Measurement")
    Efficiency = apps.get_model("planner", "Efficiency")
    for row in data["gpu"]:
        Gpu.objects.get_or_create(name=row["name"], defaults={k: v for k, v in row.items() if k != "name"})
    for row in data["model"]:
        ModelCard.objects.get_or_create(name=row["name"], defaults={k: v for k, v in row.items() if k != "name"})
    for row in data["measurement"]:
        model = ModelCard.objects.get(name=row["model"])
        gpu = Gpu.objects.get(name=row["gpu"])
        rest = {k: v for k, v in row.items() if k not in ("model", "gpu", "tensor_parallel")}
        Measurement.objects.get_or_create(model=model, gpu=gpu, tensor_parallel=row["tensor_parallel"], defaults=rest)
    for row in data["efficiency"]:
        key = {k: row[k] for k in ("moe", "tp_min", "tp_max")}
        Efficiency.objects.get_or_create(**key, defaults={k: v for k, v in row.items() if k not in key})


class Migration(migrations.Migration):
    dependencies = [("planner", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
