# ruff: noqa: F811  (the S3 fixtures are imported by name and requested by name)
"""Every bad input a user can write is named before anything starts, and no command leaves a half-started sweep.

A matrix of bad space files, task files, storage values and command-line arguments, each run in-process
through ``python -m sweep``'s ``main`` (as a user runs it, without the subprocess): exit code 2, the file,
key or value named in stderr, no traceback, no results folder, nothing started (no base prepared, no Tune,
no Ray). Then a seeded mutation fuzzer over the shipped space files, and a start refused or crashed after
its folder was written. Fast: no Ray, no trial; the S3 cases use moto's server on 127.0.0.1.
"""

from __future__ import annotations

import copy
import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from configkit.base import ConfigError
from sweep.__main__ import main
from sweep.spec.resource_checks import local_resources
from tests.support.ports import free_port
from tests.support.s3 import FAKE_CREDENTIALS, moto_server, s3_bucket  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_SPACES = sorted((ROOT / "sweep" / "search_spaces").glob("*.yaml"))
HOTEL_TASK = json.loads((ROOT / "toolenvs" / "data" / "hotel.jsonl").read_text().splitlines()[0])
BASE = """name: t
trainer: {total_steps: 2}
space:
  optim.lr: {choice: [1.0e-3]}
search: {searcher: random, num_samples: 1}
storage: results
"""
CLOSED = f"127.0.0.1:{free_port()}"  # nothing listens there: an endpoint that cannot be reached


def task_line(**changes: object) -> str:
    return json.dumps({**HOTEL_TASK, **changes}, ensure_ascii=False) + "\n"


def with_trainer(trainer: str) -> str:
    return BASE.replace("trainer: {total_steps: 2}", f"trainer: {{total_steps: 2, {trainer}}}")


def with_storage(storage: str) -> str:
    return BASE.replace("storage: results", f"storage: {json.dumps(storage)}")


@dataclass(frozen=True)
class Case:
    """Files to write under a fresh folder, the command (``{tmp}`` is that folder) and the text stderr must hold."""

    argv: tuple[str, ...]
    named: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


# A space file's own problems, each tried with `validate` and with `run` (the same door: sweep/spec/loader.py).
SPACE_FILES = {
    "repeated top-level key": ({"space.yaml": "name: a\n" + BASE}, ["key 'name' appears twice (lines 1 and 2)"]),
    "repeated trainer key": ({"space.yaml": BASE.replace("trainer: {total_steps: 2}", "trainer:\n  optim: {lr: 0.1}\n  optim: {lr: 0.2}")},
                             ["key 'trainer.optim' appears twice (lines 3 and 4)"]),
    "repeated key on one line": ({"space.yaml": with_trainer("seed: 1, seed: 2")}, ["key 'trainer.seed' appears twice (line 2, columns"]),
    "repeated swept key": ({"space.yaml": BASE + "space:\n  seed: {choice: [1, 2]}\n"}, ["key 'space' appears twice (lines 3 and 7)"]),
    "repeated key in a point": ({"space.yaml": BASE + "search: {points_to_evaluate: [{optim.lr: 1, optim.lr: 2}]}\n"},
                                ["key 'search.points_to_evaluate[0].optim.lr' appears twice"]),
    "binary space file": ({"space.yaml": b"name: t\x00\x01\x02"}, ["space.yaml: a binary file (NUL byte at 7)"]),
    "a fractional step on a whole-number key": ({"space.yaml": BASE.replace("  optim.lr: {choice: [1.0e-3]}", "  optim.lr: {choice: [1.0e-3]}\n"
                                                 "  rollout.n_samples_per_prompt: {type: quniform, low: 2, high: 8, q: 0.5}")},
                                                ["must be a whole number", "(a quniform draws whole numbers only when low, high and q are all whole: here q = 0.5"]),
    "a condition's unknown comparison": ({"space.yaml": BASE.replace("  optim.lr: {choice: [1.0e-3]}", "  optim.lr: {choice: [1.0e-3]}\n"
                                          "  algorithm.kl_coef: {choice: [0.0, 0.1]}\n  optim.warmup_steps: {choice: [0, 1], when: {algorithm.kl_coef: {bigger: 0}}}")},
                                         ["unknown key 'space.optim.warmup_steps.when.algorithm.kl_coef.bigger' (allowed here: eq, ge, gt, in, le, lt, ne)"]),
    "latin-1 space file": ({"space.yaml": "name: café\n".encode("latin-1")}, ["space.yaml: not UTF-8 text (byte 0xe9 at 9)"]),
    "utf-16 space file": ({"space.yaml": BASE.encode("utf-16")}, ["space.yaml: UTF-16 text (it starts with a byte-order mark); save the YAML file as UTF-8"]),
    "space file is a folder": ({"space.yaml/x": ""}, ["space.yaml: a directory, not a YAML file"]),
    "no such space file": ({}, ["space.yaml: no such file"]),
    "empty space file": ({"space.yaml": "# nothing yet\n"}, ["space.yaml: empty (no keys, or only comments)"]),
    "a scheduler of no kind": ({"space.yaml": BASE + "scheduler: {type: hyperband}\n"}, ["key 'scheduler.type' = 'hyperband': allowed: asha, fifo, median, pbt"]),
    "one output folder for every trial": ({"space.yaml": with_trainer("output_dir: out")}, ["key 'trainer.output_dir' = 'out': each trial of a sweep writes"]),
    "broken YAML": ({"space.yaml": "name: [t\n"}, ["space.yaml: not valid YAML", "space.yaml\", line "]),
    "control character": ({"space.yaml": "name: t\x07\n"}, ["space.yaml: not valid YAML: unacceptable character #x0007"]),
    "two documents": ({"space.yaml": BASE + "---\nname: u\n"}, ["space.yaml: not valid YAML: expected a single document"]),
    "top level is a list": ({"space.yaml": "- name: t\n"}, ["space.yaml: the top level must be a mapping of keys, got list"]),
    "nested too deeply": ({"space.yaml": "name: " + "[" * 3000 + "]" * 3000 + "\n"}, ["space.yaml: nested too deeply to read as YAML"]),
    "misspelt section": ({"space.yaml": BASE.replace("search:", "serach:")}, ["unknown key 'serach' (did you mean 'search'? allowed here:"]),
    "misspelt swept key": ({"space.yaml": BASE.replace("optim.lr:", "optim.lrr:")},
                           ["unknown trainer key 'space.optim.lrr' (did you mean 'optim.lr'? optim's keys: optim.lr, optim.weight_decay,"]),
    "misspelt metric": ({"space.yaml": BASE.replace("num_samples: 1}", "num_samples: 1, metric: reward/avg_pass_at1}")},
                        ["key 'search.metric' = 'reward/avg_pass_at1' is not reported; did you mean 'reward/avg_pass_at_1'? allowed: "]),
    "a choice given a value twice": ({"space.yaml": BASE.replace("[1.0e-3]", "[1.0e-3, 1.0e-4, 1.0e-3]")},
                                     ["key 'space.optim.lr' = {'type': 'choice', 'values': [0.001, 0.0001, 0.001]}: items 1 and 3 are the same value; give each value once"]),
    "name that climbs out": ({"space.yaml": BASE.replace("name: t", "name: '..'")}, ["key 'name' = '..'", "is not a name"]),
    "unknown env key": ({"space.yaml": with_trainer("env: {env_keys: [hotle]}")},
                        ["key 'env.env_keys' = ['hotle']: no tasks of env.tasks_path", "have env_key 'hotle'; did you mean 'hotel'? theirs: hotel"]),
    "one env key unknown": ({"space.yaml": with_trainer("env: {env_keys: [hotel, nope, zilow]}")},
                            ["have env_key 'nope', 'zilow'; theirs: hotel"]),
    "no env key": ({"space.yaml": with_trainer("env: {env_keys: []}")}, ["key 'env.env_keys' = []: an empty list selects no tasks"]),
    "task file missing": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}")}, ["key 'env.tasks_path'", "tasks.jsonl: no such file"]),
    "task file is binary": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"), "tasks.jsonl": b"\x1f\x8b\x08\x00\x00"},
                            ["tasks.jsonl: a binary file (NUL byte at 3)"]),
    "task file not UTF-8": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"), "tasks.jsonl": task_line(prompt="Réserve").encode("latin-1")},
                            ["tasks.jsonl: not UTF-8 text (byte 0xe9"]),
    "task file is a folder": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"), "tasks.jsonl/x": ""}, ["tasks.jsonl: a directory"]),
    "task file empty": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"), "tasks.jsonl": "\n"}, ["tasks.jsonl: no tasks in it; a task file is JSON lines"]),
    "task file list empty": ({"space.yaml": with_trainer("env: {tasks_path: []}")}, ["key 'env.tasks_path' = []: no tasks in the file(s)"]),
    "eval task file empty": ({"space.yaml": with_trainer("eval: {interval: 1, tasks_path: eval.jsonl}"), "eval.jsonl": "[]"}, ["eval.jsonl: no tasks in it"]),
    "task of an unknown env": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"), "tasks.jsonl": task_line(env_key="hotle")},
                               ["key 'trainer.env.backend' = {type: local}: env_key(s) hotle are not local apps (known: github, hotel"]),
    "every bad record named": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"),
                                "tasks.jsonl": task_line() + "{oops\n" + task_line(task_key="b", colour="red") + task_line()},
                               ["tasks.jsonl:2: not valid JSON", "tasks.jsonl:3 (task 'b'): unknown key 'colour'",
                                "tasks.jsonl:4: key 'task_key' = 'hotel-book_id-00' appears twice (first at"]),
    "task with a key twice": ({"space.yaml": with_trainer("env: {tasks_path: tasks.jsonl}"),
                               "tasks.jsonl": task_line().replace('"prompt":', '"prompt": "x", "prompt":', 1)},
                              ["tasks.jsonl:1 (task 'hotel-book_id-00'): key 'prompt' appears twice in the record"]),
    "eval file bad": ({"space.yaml": with_trainer("eval: {interval: 1, tasks_path: [held.jsonl]}"), "held.jsonl": "[1,"},
                      ["key 'eval.tasks_path'", "held.jsonl: not valid JSON"]),
    # configs are strict about types: nothing is coerced, a section of the wrong type is never replaced by defaults
    "trainer section a list": ({"space.yaml": BASE.replace("trainer: {total_steps: 2}", "trainer: [total_steps, 2]")},
                               ["key 'trainer' = ['total_steps', 2]: must be a mapping of keys (a section), not a list"]),
    "trainer section empty": ({"space.yaml": BASE.replace("trainer: {total_steps: 2}", "trainer:")},
                              ["key 'trainer' = None: must be a mapping of keys (a section), not empty (null)"]),
    "search section a word": ({"space.yaml": BASE.replace("search: {searcher: random, num_samples: 1}", "search: random")},
                              ["key 'search' = 'random': must be a mapping of keys (a section), not text"]),
    "true for a number": ({"space.yaml": with_trainer("optim: {lr: true}")}, ["key 'trainer.optim.lr' = True: must be a number, not true/false"]),
    "true for a resource": ({"space.yaml": BASE + "resources: {cpus_per_trial: true}\n"},
                           ["key 'resources.cpus_per_trial' = True: must be a number, not true/false"]),
    "a float for a whole number": ({"space.yaml": BASE.replace("total_steps: 2", "total_steps: 2.0")},
                                   ["key 'trainer.total_steps' = 2.0: must be a whole number: write 2, without the decimal point"]),
    "a number for true/false": ({"space.yaml": with_trainer("model: {shipped_base: 1}")},
                                ["key 'trainer.model.shipped_base' = 1: must be true or false, not a whole number"]),
    "NaN for a number": ({"space.yaml": with_trainer("algorithm: {kl_coef: .nan}")},
                         ["key 'trainer.algorithm.kl_coef' = nan: must be a finite number, not .nan or .inf"]),
    "infinity in a range": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{loguniform: [1.0e-6, .inf]}")},
                            ["key 'space.optim.lr.high' = inf: must be a finite number, not .nan or .inf"]),
    "quoted number": ({"space.yaml": with_trainer("optim: {lr: '1e-3'}")}, ["key 'trainer.optim.lr' = '1e-3': must be a number, not text (write it without quotes)"]),
    "true among the choices": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{choice: [1.0e-3, true]}")},
                               ["key 'space.optim.lr' can give True, which the trainer refuses", "must be a number, not true/false"]),
    "an order against text": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}\n", "{choice: [1.0e-3]}\n  algorithm.kl_coef: {choice: [0.0, 0.1], when: {optim.lr: {gt: abc}}}\n")},
                              ["key 'space.algorithm.kl_coef.when.optim.lr'", "gt: 'abc' is not a number; gt compares numbers"]),
    "a step too small for quniform": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{quniform: [1.0e-5, 1.0e-3, 5.0e-324]}")},
                                      ["makes more than 1e+06 steps from low to high; use uniform or loguniform"]),
    "a step larger than the range": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{quniform: [1.0e-5, 1.0e-3, 1000]}")},
                                     ["q (1000) is larger than high - low (0.00099): every trial would draw low"]),
    "pbt on a grid with a sampled key": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{uniform: [1.0e-5, 1.0e-3]}").replace(
        "{searcher: random, num_samples: 1}", "{searcher: grid, num_samples: 2}").replace("total_steps: 2", "total_steps: 4, checkpoint: {interval: 2}")
        + "scheduler: {type: pbt, perturbation_interval: 2, mutations: {optim.lr: {uniform: [1.0e-5, 1.0e-3]}}}\nmax_concurrent_trials: 2\n"},
        ["key 'space.optim.lr' is uniform; the grid searcher needs grid, choice or fixed values"]),
    # YAML 1.1 reads these otherwise than they look
    "a seed with a leading zero": ({"space.yaml": with_trainer("seed: 010")},
                                   ["key 'trainer.seed' = 010 (line 2): a leading zero, which YAML 1.1 reads as octal (8): write 10"]),
    "steps in base 60": ({"space.yaml": BASE.replace("total_steps: 2", "total_steps: 1:30")},
                         ["key 'trainer.total_steps' = 1:30 (line 2): YAML 1.1 reads it in base 60 (90)"]),
    "off for a schedule": ({"space.yaml": with_trainer("optim: {lr_schedule: off}")},
                           ["key 'trainer.optim.lr_schedule' = False", "YAML reads an unquoted yes, no, on or off as true/false"]),
    "an alias bomb": ({"space.yaml": with_trainer("seed: [&b0 [x, x, x, x, x, x, x, x, x], "  # 9**8 items, once expanded: a message of MBs
                                                  + ", ".join(f"&b{i} [{', '.join([f'*b{i - 1}'] * 9)}]" for i in range(1, 9)) + "]")},
                      ["key 'trainer.seed' = [['x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', … 1 more], [['x', ", "…: must be a whole number, not a list"]),
    "an alias bomb for a range": ({"space.yaml": BASE.replace("{choice: [1.0e-3]}", "{uniform: [&c0 [x, x, x, x, x, x, x, x, x], "
                                                               + ", ".join(f"&c{i} [{', '.join([f'*c{i - 1}'] * 9)}]" for i in range(1, 9)) + "]}")},
                                  ["key 'space.optim.lr' = {'uniform': [['x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', … 1 more], ", "uniform takes [low, high], got [["]),
    "a task file nested too deeply": ({"space.yaml": with_trainer("env: {tasks_path: deep.json}"), "deep.json": "[" * 100000 + "]" * 100000},
                                      ["deep.json: nested too deeply to read as JSON"]),
}

# Storage values, each tried in the space file (`validate`) and as `run --storage`.
STORAGE = {
    "an existing file": ("afile", ["key 'storage' = 'afile'", "afile is a file, not a directory"]),
    "under a file": ("afile/results", ["afile is a file, so", "cannot be made"]),
    "one slash": ("s3:/bucket/p", ["'s3:/bucket/p': looks like a URI but is not one (s3: without //)", "allowed: a local directory"]),
    "no slash": ("s3:bucket", ["looks like a URI but is not one"]),
    "gs one slash": ("gs:/bucket", ["looks like a URI but is not one (gs: without //)"]),
    "upper-case scheme": ("S3://bucket/p", ["write the scheme in lower case, s3://bucket/p"]),
    "gs": ("gs://bucket/p", ["scheme gs:// is not supported; allowed: a local directory (a plain path) or s3://bucket/prefix"]),
    "hdfs": ("hdfs://namenode/p", ["scheme hdfs:// is not supported"]),
    "file URI": ("file:///tmp/results", ["write a local directory as a plain path (/tmp/results), not file://"]),
    "empty": ("", ["key 'storage' = '': empty"]),
    "blanks around": (" results", ["leading/trailing blanks"]),
    "no bucket": ("s3:///p", ["no bucket"]),
    "bucket too short": ("s3://ab/p", ["'ab' is not a valid bucket name (letters, digits"]),
    "bucket with a port": ("s3://bucket:9000/p", ["'bucket:9000' is not a valid bucket name"]),
    "bucket with ..": ("s3://my..bucket/p", ["'my..bucket' is not a valid bucket name"]),
    "bucket an IP": ("s3://10.0.0.1/p", ["'10.0.0.1' is not a valid bucket name"]),
    "bucket ends in -": ("s3://bucket-/p", ["'bucket-' is not a valid bucket name"]),
    "empty prefix part": ("s3://bucket//p", ["the prefix has an empty part"]),
    "fragment": ("s3://bucket/p#x", ["a '#'"]),
    "unknown option": ("s3://bucket/p?colour=blue", ["unknown option colour"]),
    "bad scheme option": ("s3://bucket/p?scheme=ftp", ["option scheme='ftp'; allowed: http, https"]),
    "bad endpoint port": ("s3://bucket/p?endpoint_override=localhost:99999", ["option endpoint_override = 'localhost:99999': not host:port"]),
    "bad endpoint scheme": ("s3://bucket/p?endpoint_override=ftp://host:21", ["scheme ftp:// is not http:// or https://"]),
    "endpoint with a path": ("s3://bucket/p?endpoint_override=http://host:9000/api", ["not host:port or http(s)://host:port"]),
    "a shell variable": ("$HOME/sweeps", ["'$HOME/sweeps': $HOME is not expanded here (only ~ is); write the path itself"]),
    "a braced shell variable": ("${RESULTS}/sweeps", ["${RESULTS} is not expanded here"]),
    "keys before the bucket": ("s3://AKIAXX:hunter2@bucket/p", ["the URI carries a user and password before the bucket (user:secret@)"]),
    "a secret-named option": ("s3://bucket/p?aws_secret_access_key=hunter2", ["the URI carries aws_secret_access_key; credentials come only from the environment"]),
    "a home of no user": ("~nosuchuser-grpo/x", ["'~nosuchuser-grpo/x': ~nosuchuser-grpo is no user's home on this machine"]),
    "an option twice": ("s3://bucket/p?scheme=ftp&scheme=http", ["option scheme given more than once (one would silently win)"]),
    "an empty option": ("s3://bucket/p?region=", ["option region empty; give each option once, with a value"]),
}

# The environment's endpoint for s3:// storage.
ENDPOINTS = {
    "endpoint one slash": ("http:/127.0.0.1:9000", ["AWS_ENDPOINT_URL = 'http:/127.0.0.1:9000': not host:port"]),
    "endpoint scheme": ("htp://127.0.0.1:9000", ["AWS_ENDPOINT_URL = 'htp://127.0.0.1:9000': scheme htp:// is not http://"]),
    "endpoint no host": ("http://", ["AWS_ENDPOINT_URL = 'http://': not host:port"]),
    "endpoint words": ("not a url", ["AWS_ENDPOINT_URL = 'not a url': not host:port"]),
}

# The Ray cluster to join (validate checks resources against it; run joins it after the bases): refused at once.
RAY_ADDRESSES = {
    "ray address not host:port": ("garbage", ["RAY_ADDRESS = 'garbage': not host:port; give host:port of a running cluster's head"]),
    "ray address nobody answers": ("127.0.0.1:1", ["RAY_ADDRESS = '127.0.0.1:1': nothing answers there"]),
    "ray address of a dashboard": ("http://u:hunter2@127.0.0.1:8265", ["RAY_ADDRESS = 'http://***@127.0.0.1:8265': an http address is the dashboard's"]),
}

# Command-line arguments of run, validate, resume and train.
SPACE = "{tmp}/space.yaml"
FLEET_SPLIT = ["data", "split", "{tmp}/booking.jsonl", "--out", "{tmp}/new", "--method", "fleet"]
COMMAND_LINE = {
    "set without =": (["validate", SPACE, "--set", "optim.lr"], ["--set 'optim.lr': write it as dotted.key=value"]),
    "set without key": (["run", SPACE, "--set", "=3"], ["write it as dotted.key=value"]),
    "set of no key": (["validate", SPACE, "--set", "nothing.here=1"], ["--set nothing.here: unknown key 'nothing' (trainer keys:"]),
    "set of broken YAML": (["run", SPACE, "--set", "optim.lr=[1,"], ["--set 'optim.lr=[1,': not valid YAML", 'in "the value of optim.lr", line 1, column 4']),
    "set with a repeated key": (["validate", SPACE, "--set", "trainer={seed: 1, seed: 2}"], ["--set 'trainer={seed: 1, seed: 2}': key 'trainer.seed' appears twice (columns 2 and 11 of the value)"]),
    "set a secret YAML 1.1 reads as octal": (["validate", SPACE, "--set", "logging.wandb.api_key=0123"],
                                             ["--set logging.wandb.api_key: key 'logging.wandb.api_key' = ***: a number YAML 1.1 "
                                              "reads otherwise than it looks (a leading zero: octal; a colon: base 60): quote it if it is text"]),
    "set of a swept key": (["run", SPACE, "--set", "optim.lr=0.5"], ["--set optim.lr: the space sweeps this key"]),
    "set of a bad value": (["validate", SPACE, "--set", "total_steps=-1"], ["key 'trainer.total_steps' = -1"]),
    "num-samples 0": (["run", SPACE, "--num-samples", "0"], ["--set search.num_samples=0", "key 'search.num_samples' = 0"]),
    "num-samples not a number": (["run", SPACE, "--num-samples", "x"], ["argument --num-samples: invalid int value: 'x'"]),
    "unknown flag": (["validate", SPACE, "--sett", "x=1"], ["unrecognized arguments: --sett"]),
    "storage flag one slash": (["run", SPACE, "--storage", "s3:/b/x"], ["key 'storage' = 's3:/b/x': looks like a URI"]),
    "resume nothing there": (["resume", "{tmp}/results/t"], ["no sweep to resume here (no tuner.pkl); start one with `python -m sweep run SPACE`"]),
    "resume a file": (["resume", "{tmp}/afile"], ["no sweep to resume here"]),
    "resume one slash": (["resume", "s3:/bucket/t"], ["the sweep's path = 's3:/bucket/t': looks like a URI"]),
    "resume upper-case scheme": (["resume", "S3://bucket/t"], ["the sweep's path = 'S3://bucket/t': write the scheme in lower case"]),
    "resume gs": (["resume", "gs://bucket/t"], ["the sweep's path = 'gs://bucket/t': scheme gs:// is not supported"]),
    "resume no name": (["resume", "s3://bucket/"], ["name the sweep's directory, s3://bucket/prefix/NAME"]),
    "resume bad bucket": (["resume", "s3://b_/t"], ["'b_' is not a valid bucket name"]),
    "resume unreachable": (["resume", f"s3://bucket/t?endpoint_override={CLOSED}&scheme=http"],
                           ["the bucket 'bucket' could not be reached at " + CLOSED]),
    "run unreachable": (["run", SPACE, "--storage", f"s3://bucket/p?endpoint_override={CLOSED}&scheme=http"],
                        ["error: --storage = 's3://bucket/p", "could not be reached at " + CLOSED, "check the endpoint"]),
    "run unreachable from the file": (["run", "{tmp}/unreachable.yaml"],
                                      ["unreachable.yaml: key 'storage' = 's3://bucket/p", "could not be reached at " + CLOSED]),
    "train unknown env key": (["train", "{tmp}/trainer.yaml"], ["trainer.yaml: key 'env.env_keys' = ['nope']: no tasks of env.tasks_path", "have env_key 'nope'"]),
    "train repeated key": (["train", "{tmp}/dup.yaml"], ["dup.yaml: key 'optim.lr' appears twice (lines 2 and 3)"]),
    "train task of an unknown env": (["train", "{tmp}/fleet.yaml"], ["key 'env.backend' = {type: local}: env_key(s) booking are not local apps"]),
    "train a float for a whole number": (["train", "{tmp}/typed.yaml"], ["typed.yaml: key 'total_steps' = 2.0: must be a whole number"]),
    "set a float for a whole number": (["validate", SPACE, "--set", "total_steps=3.0"], ["key 'trainer.total_steps' = 3.0: must be a whole number"]),
    "set true for a number": (["run", SPACE, "--set", "resources.cpus_per_trial=true"], ["key 'resources.cpus_per_trial' = True: must be a number"]),
    "set a number for true/false": (["validate", SPACE, "--set", "logging.progress=0"], ["key 'logging.progress' = 0: must be true or false"]),
    "warm-start env not trained on": (["validate", SPACE, "--set", "model.warmstart_envs={zillow: {weight: 2}}"],
                                      ["key 'trainer.model.warmstart_envs.zillow': no training task has env_key 'zillow' (they have: hotel)"]),
    "warm-start every env left out": (["train", "{tmp}/silent.yaml"], ["silent.yaml: key 'model.warmstart_envs': every env's weight is 0 (hotel)"]),
    "set given twice": (["validate", SPACE, "--set", "seed=1", "--set", "seed=2"], ["--set seed is given twice (1, then 2): give it once"]),
    "set of one key two ways": (["run", SPACE, "--set", "seed=1", "--set", "trainer.seed=2"],
                                ["--set seed and --set trainer.seed set the same trainer key (1, 2): give it once"]),
    "storage flag and set": (["run", SPACE, "--storage", "a", "--set", "storage=b"], ["--storage and --set storage both given: give one"]),
    "resume from nothing": (["validate", SPACE, "--set", "resume_from={tmp}/nope"],
                            ["key 'trainer.resume_from' = '", "nope': no such directory on this machine"]),
    "resume from a folder not a checkpoint": (["train", "{tmp}/trainer_ok.yaml", "--set", "resume_from={tmp}"],
                                              ["key 'resume_from' = '", "not a grpo-sweep checkpoint (no trainer_state.json in it)"]),
    "a model folder not there": (["validate", SPACE, "--set", "model.name_or_path=/no/such/model"],
                                 ["key 'trainer.model.name_or_path' = '/no/such/model': no such directory on this machine"]),
    # each ran a whole sweep before, its every trial failing on the load
    "a model folder without a config": (["run", SPACE, "--set", "model.name_or_path={tmp}/split"],
                                        ["split': no config.json in it: not a Hugging Face model folder"]),
    "a model folder whose config is no JSON": (["validate", SPACE, "--set", "model.name_or_path={tmp}/notamodel"],
                                               ["notamodel': its config.json cannot be read as JSON (JSONDecodeError"]),
    "a model folder without weights": (["run", SPACE, "--set", "model.name_or_path={tmp}/configonly"],
                                       ["configonly': no weights in it (no model*.safetensors or pytorch_model*.bin)"]),
    "a model folder without a tokenizer": (["validate", SPACE, "--set", "model.name_or_path={tmp}/notokenizer"],
                                           ["notokenizer': no tokenizer in it (none of tokenizer.json"]),
    "a base built into a file": (["validate", SPACE, "--set", "model.shipped_base=false", "--set", "model.cache_dir={tmp}/afile"],
                                 ["key 'trainer.model.cache_dir' = ", "the base policy is built there (no shipped one for this recipe), but", "afile is a file, not a directory"]),
    "train a base built into a file": (["train", "{tmp}/trainer_ok.yaml", "--set", "model.shipped_base=false", "--set", "model.cache_dir={tmp}/afile/c"],
                                       ["key 'model.cache_dir' = ", "afile is a file, so", "cannot be made"]),
    "train on workers that split no batch": (["train", "{tmp}/trainer_ok.yaml", "--workers", "3"], ["with 3 workers", "every worker needs the same number of tasks"]),
    "a verifier type the app lacks": (["validate", SPACE, "--set", "env.tasks_path={tmp}/odd.jsonl"],
                                      ["1 hotel task(s) name a verifier type the app does not have: odd-1 ('no_such_verifier'); known: booking_cancelled"]),
    "a verifier spec the app cannot judge": (["validate", SPACE, "--set", "env.tasks_path={tmp}/unread.jsonl"],
                                             ["2 hotel task(s) have a verifier spec the app cannot judge as meant: bare (lacks 'check_in'",
                                              "text-5 ('nights' = '5' (must be a whole number, 1 or more))"]),
    "env_variables the apps act on missing": (["validate", SPACE, "--set", "env.tasks_path={tmp}/nobody.jsonl"],
                                              ["2 task(s) lack env_variables the local apps act on (CURRENT_DATE, LOGGED_IN_USER): "
                                               "nobody (LOGGED_IN_USER), empty (CURRENT_DATE, LOGGED_IN_USER)",
                                               "1 task(s) have an env_variables LOGGED_IN_USER that is no user name (text): numbered (5)"]),
    "a CURRENT_DATE that is no date": (["validate", SPACE, "--set", "env.tasks_path={tmp}/undated.jsonl"],
                                       ["1 task(s) have an env_variables CURRENT_DATE that is no date YYYY-MM-DD: undated ('2026-02-30')"]),
    "an initial_state the app cannot start from": (["validate", SPACE, "--set", "env.tasks_path={tmp}/unseeded.jsonl"],
                                                   ["2 hotel task(s) have an initial_state the app cannot start from: "
                                                    "count (TypeError: 'int' object is not iterable); keyless (KeyError: 'booking_id')"]),
    "live port above 65535": (["run", SPACE, "--live-port", "70000"], ["argument --live-port: 70000 is not a port; give a whole number from 0"]),
    "dashboard port negative": (["resume", "{tmp}", "--dashboard-port", "-1"], ["argument --dashboard-port: -1 is not a port"]),
    "search seed negative": (["validate", SPACE, "--set", "search.seed=-1"], ["key 'search.seed' = -1: Input should be greater than or equal to 0"]),
    "seed past numpy's": (["validate", SPACE, "--set", "seed=18446744073709551616"], ["key 'trainer.seed' = 18446744073709551616: Input should be less than or equal to 2147483647"]),
    "warm-start seed past numpy's": (["train", "{tmp}/trainer_ok.yaml", "--set", "model.warmstart_seed=4294967296"],
                                     ["key 'model.warmstart_seed' = 4294967296: Input should be less than or equal to 2147483647"]),
    "train workers 0": (["train", "{tmp}/trainer_ok.yaml", "--workers", "0"], ["argument --workers: 0 is below 1; give 1 or more"]),
    "train metrics into a folder": (["train", "{tmp}/trainer_ok.yaml", "--metrics-jsonl", "{tmp}"], ["--metrics-jsonl ", ": a directory; name a file to write"]),
    "forecast k 0": (["forecast", SPACE, "--k", "0"], ["argument --k: 0 is below 1"]),
    "forecast probe into a folder": (["forecast", SPACE, "--save-probe", "{tmp}"], [": a directory; name a file to write"]),
    "forecast probe over a file": (["forecast", SPACE, "--save-probe", "{tmp}/afile"],
                                   ["afile: the file exists and would be replaced; name another file, or add --force to replace it"]),
    "envs check into a folder": (["envs", "check", "--write", "{tmp}"], ["--write ", ": a directory; name a file to write"]),
    "envs check over a file": (["envs", "check", "--write", "{tmp}/afile"], ["afile: the file exists and would be replaced"]),
    "split over a split": (["data", "split", "{tmp}/booking.jsonl", "--out", "{tmp}/split"],
                           ["split: train.jsonl, eval.jsonl already there and would be replaced; name another directory, or add --force"]),
    "split into a file": (["data", "split", "{tmp}/booking.jsonl", "--out", "{tmp}/afile"], ["afile: a file, not a directory"]),
    # Fleet's split reads neither a seed nor a per-env cap (its own are fixed): given, they are refused, not ignored
    "fleet split with a seed": ([*FLEET_SPLIT, "--seed", "3"],
                                ["--seed applies to --method seeded only"]),
    "fleet split with a per-env cap": ([*FLEET_SPLIT, "--eval-cap-per-env", "2"],
                                       ["--eval-cap-per-env applies to --method seeded only"]),
    "fleet split env share 0": ([*FLEET_SPLIT, "--max-env-ratio", "0"],
                                ["--max-env-ratio = 0.0: must be in (0, 1]"]),
    "fleet split 0 eval prompts": ([*FLEET_SPLIT, "--max-eval-prompts", "0"],
                                   ["--max-eval-prompts = 0: must be at least 1"]),
    "fleet split ratio 1": ([*FLEET_SPLIT, "--eval-ratio", "1"],
                            ["--eval-ratio = 1.0: must be in [0, 1)"]),
    "fleet split of no such env": ([*FLEET_SPLIT, "--env-key", "bookng"],
                                   ["--env-key bookng: no such env_key in the tasks (present: booking)"]),
    "fleet split with nothing to train": (["data", "split", "{tmp}/booking.jsonl", "--out", "{tmp}/new", "--method", "fleet",
                                           "--held-out-env", "booking"], ["no training tasks left by Fleet's rules", "nothing was written"]),
    "report over a user's page": (["report", "{tmp}", "--out", "{tmp}/site"], ["--out ", "site: index.html already there and would be replaced", "--force"]),
    "report into a file": (["report", "{tmp}", "--out", "{tmp}/afile"], ["--out ", "afile: a file, not a directory"]),
    "report NaN threshold": (["report", "{tmp}", "--min-delta", "nan"], ["--min-delta = nan: allowed: a number at least 0 and at most 1"]),
    "report negative threshold": (["report", "{tmp}", "--min-delta", "-1"], ["--min-delta = -1.0: allowed"]),
    "report ratio below 1": (["report", "{tmp}", "--huge-update-ratio", "0.5"], ["--huge-update-ratio = 0.5: allowed: a number above 1"]),
    "report failing above saturated": (["report", "{tmp}", "--failing", "0.95"], ["--failing = 0.95 is not below --saturated = 0.9"]),
    "confirm nothing there": (["confirm", "{tmp}/results/t"], ["no sweep to confirm here (no tuner.pkl)"]),
    "confirm top 0": (["confirm", "{tmp}/results/t", "--top", "0"], ["argument --top: 0 is below 1; give 1 or more"]),
    "confirm 0 steps": (["confirm", "{tmp}/results/t", "--steps", "0"], ["argument --steps: 0 is below 1"]),
    "unsweep a key not swept": (["validate", SPACE, "--set", "space.optim.lrr=null"],
                                ["--set space.optim.lrr=null: the space does not sweep 'optim.lrr' (it sweeps: optim.lr); nothing to unsweep"]),
    "space key set where space is not a section": (["validate", "{tmp}/listspace.yaml", "--set", "space.optim.lr={choice: [0.1]}"],
                                                   ["--set space.optim.lr: the file's key 'space' is not a section to set it in"]),
    "report importance from 0 trials": (["report", "{tmp}", "--min-complete", "0"], ["--min-complete = 0: allowed: a whole number of 1 or more"]),
}
COMMAND_LINE_FILES = {
    "space.yaml": BASE, "afile": "", "unreachable.yaml": with_storage(f"s3://bucket/p?endpoint_override={CLOSED}&scheme=http"),
    "trainer.yaml": "total_steps: 2\nenv: {env_keys: [nope]}\n",
    "dup.yaml": "optim:\n  lr: 0.1\n  lr: 0.2\n",
    "fleet.yaml": "total_steps: 2\nenv: {tasks_path: booking.jsonl}\n",
    "booking.jsonl": task_line(env_key="booking"),
    "typed.yaml": "total_steps: 2.0\n",
    "silent.yaml": "total_steps: 2\nmodel: {warmstart_envs: {hotel: {weight: 0}}}\n",
    "trainer_ok.yaml": "total_steps: 2\n",
    "listspace.yaml": BASE.replace("space:\n  optim.lr: {choice: [1.0e-3]}", "space: [optim.lr]"),
    "split/train.jsonl": task_line(), "split/eval.jsonl": task_line(),
    "site/index.html": "<h1>my page</h1>",
    "odd.jsonl": "".join(task_line(task_key=f"h-{i}") for i in range(3)) + task_line(task_key="odd-1", verifier={"type": "no_such_verifier"}),
    "unread.jsonl": "".join(task_line(task_key=f"h-{i}") for i in range(3))
    + task_line(task_key="bare", verifier={"type": "booking_made", "hotel_id": "H01", "nights": 2})
    + task_line(task_key="text-5", verifier={"type": "booking_made", "hotel_id": "H01", "check_in": "2026-03-01", "nights": "5"}),
    "notamodel/config.json": "not a model", "configonly/config.json": '{"model_type": "qwen2"}',
    "notokenizer/config.json": '{"model_type": "qwen2"}', "notokenizer/model.safetensors": "",
    "nobody.jsonl": "".join(task_line(task_key=f"h-{i}") for i in range(3))
    + task_line(task_key="nobody", env_variables={"CURRENT_DATE": "2026-02-01", "LOGGED_IN_NAME": "U"}) + task_line(task_key="empty", env_variables={})
    + task_line(task_key="numbered", env_variables={"CURRENT_DATE": "2026-02-01", "LOGGED_IN_USER": 5}),
    "unseeded.jsonl": "".join(task_line(task_key=f"h-{i}") for i in range(3))  # every episode of these failed to open (HTTP 422)
    + task_line(task_key="count", initial_state={"bookings": 7}) + task_line(task_key="keyless", initial_state={"bookings": [{"hotel_id": "H01"}]}),
    "undated.jsonl": "".join(task_line(task_key=f"h-{i}") for i in range(3))
    + task_line(task_key="undated", env_variables={"CURRENT_DATE": "2026-02-30", "LOGGED_IN_USER": "u1", "LOGGED_IN_NAME": "U"}),
}


def _cases() -> list:
    cases = []
    for name, (files, named) in SPACE_FILES.items():
        for command in ("validate", "run"):
            cases.append(pytest.param(Case((command, SPACE), tuple(named), files), id=f"space: {name} ({command})"))
    for name, (value, named) in STORAGE.items():
        files = {"afile": ""}
        cases.append(pytest.param(Case(("validate", SPACE), tuple(named), {**files, "space.yaml": with_storage(value)}), id=f"storage: {name} (file)"))
        cases.append(pytest.param(Case(("run", SPACE, "--storage", value), tuple(named), {**files, "space.yaml": BASE}), id=f"storage: {name} (--storage)"))
    for name, (endpoint, named) in ENDPOINTS.items():
        for command in ("validate", "run"):
            case = Case((command, SPACE), tuple(named), {"space.yaml": with_storage("s3://bucket/p")}, {"AWS_ENDPOINT_URL": endpoint})
            cases.append(pytest.param(case, id=f"storage: {name} ({command})"))
    for name, (address, named) in RAY_ADDRESSES.items():
        for command in ("validate", "run"):
            case = Case((command, SPACE), tuple(named), {"space.yaml": BASE}, {"RAY_ADDRESS": address})
            cases.append(pytest.param(case, id=f"command line: {name} ({command})"))
    # root writes to any folder it makes: there, a folder no one may write to (procfs refuses even root)
    unwritable = {"space.yaml": with_storage("/proc/1/grpo-sweep-results")} if os.geteuid() == 0 else {"space.yaml": with_storage("ro/results"), "ro/": ""}
    cases.append(pytest.param(Case(("validate", SPACE), ("is not writable by this user",), unwritable), id="storage: unwritable folder"))
    if os.geteuid() == 0:  # procfs's root folder passes os.access for root (for anyone else os.access refuses it already)
        procfs = {"space.yaml": with_storage("/proc/grpo-sweep-results")}
        cases.append(pytest.param(Case(("validate", SPACE), ("/proc is not writable by this user",), procfs), id="storage: a filesystem that refuses new folders"))
    for name, (argv, named) in COMMAND_LINE.items():
        cases.append(pytest.param(Case(tuple(argv), tuple(named), COMMAND_LINE_FILES), id=f"command line: {name}"))
    return cases


CASES = _cases()


@pytest.fixture
def started(monkeypatch):
    """What a command started, recorded instead of done: the environment's settings, the bases, Tune."""
    import sweep.run
    import sweep.trials.base_evals

    calls: list[str] = []
    monkeypatch.setattr(sweep.run, "prepare_environment", lambda: calls.append("environment"))
    monkeypatch.setattr(sweep.trials.base_evals, "build_bases", lambda cfg: calls.append("bases"))
    monkeypatch.setattr(sweep.trials.base_evals, "evaluate_bases", lambda cfg, store: calls.append("base evals"))
    monkeypatch.setattr(sweep.run, "_fit_and_report", lambda cfg, store, make_tuner, watch: calls.append("tune") or 0)
    return calls


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """``python -m sweep ARGV`` in this process: (exit code, stdout, stderr); argparse's refusals exit 2 too."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, out: str, err: str, named: tuple[str, ...], tmp_path: Path, started: list[str]) -> None:
    assert code == 2, (code, out, err)
    for text in named:
        assert text in err, f"{text!r} not in:\n{err}"
    assert "Traceback" not in out + err
    assert not started, started
    assert not (tmp_path / "results").exists() and not (tmp_path / "sweep_results").exists()
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()


def write_files(tmp_path: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("/"):
            path.chmod(0o555)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.mark.parametrize("case", CASES)
def test_a_bad_input_is_named_and_nothing_starts(case: Case, tmp_path, monkeypatch, capsys, started):
    monkeypatch.chdir(tmp_path)  # relative storage and task paths land in this test's folder
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for key, value in {**FAKE_CREDENTIALS, **case.env}.items():  # no credentials lookup on the network
        monkeypatch.setenv(key, value)
    write_files(tmp_path, case.files)
    code, out, err = run_main([arg.replace("{tmp}", str(tmp_path)) for arg in case.argv], capsys)
    assert_refused(code, out, err, case.named, tmp_path, started)


SECRET = "hunter2-SeCrEt"
OCTAL_SECRET = "0123456"  # YAML 1.1 would read it as a number: refused, unshown


@pytest.mark.parametrize("argv", [
    ["validate", SPACE, "--set", f"storage=s3://bucket/p?secret_key={SECRET}"],
    ["validate", SPACE, "--set", f"storage=s3://AKIAXX:{SECRET}@bucket/p"],
    ["run", SPACE, "--storage", f"s3://bucket/p?aws_secret_access_key={SECRET}"],
    ["validate", SPACE, "--set", f"logging.wandb.api_key={SECRET}"],
    ["train", "{tmp}/trainer_ok.yaml", "--set", f"logging.api_key={SECRET}"],
    ["validate", SPACE, "--set", f"logging.api_key={SECRET}", "--set", "total_steps=-1"],
    ["validate", SPACE, "--set", f"api_key={SECRET}", "--set", f"api_key={SECRET}"],
    ["validate", SPACE, "--set", f"logging.wandb.api_key='{SECRET}"],
    ["validate", SPACE, "--set", f"logging.wandb={{api_key: {SECRET}}}"],
    ["validate", SPACE, "--set", f"env.backend.api_key={SECRET}"],
    ["validate", SPACE, "--set", f"env.backend={{type: fleet, api_key: {SECRET}}}"],
    ["validate", SPACE, "--set", f"storage=S3://u:{SECRET}@bucket/p"],
    ["validate", SPACE, "--set", f"storage=s3:u:{SECRET}@bucket/p"],
    ["validate", SPACE, "--set", f"storage=s3://bucket/p?endpoint_override=http://ak:{SECRET}@host:9000/x"],
    ["validate", SPACE, "--set", f"storage=[s3://AKIAXX:{SECRET}@bucket/p"],
    ["validate", SPACE, "--set", f"storage=s3://bucket/p?AWSAccessKeyId=AKIAXX&Signature={SECRET}"],
    ["validate", SPACE, "--set", f"storage=s3://bucket/p?AWSAccessKeyId={SECRET}"],
    ["validate", SPACE, "--set", f"storage=s3://bucket/p?key={SECRET}"],
    ["validate", SPACE, "--set", f"logging.wandb.api_key={OCTAL_SECRET}"],
    ["validate", SPACE, "--set", f"logging.wandb={{api_key: {OCTAL_SECRET}}}"],
    ["validate", SPACE, "--set", f"space.logging.wandb.api_key={{choice: ['{SECRET}', '{SECRET}']}}"],
    ["validate", SPACE, "--set", f"env.backend.token=[{OCTAL_SECRET}]"],
    ["validate", SPACE, "--set", f"logging.wandb.api_key={{{SECRET}: 1, {SECRET}: 2}}"],
    ["validate", SPACE, "--set", f"env.backend.aws_access={{key: {OCTAL_SECRET}}}"],
], ids=["query key", "user and password", "secret-named option", "wandb key", "trainer key", "beside another error", "given twice",
        "broken YAML", "inside a section", "inside a backend", "a backend section", "upper-case scheme", "missing //", "endpoint's password",
        "broken YAML around a URI", "a signed URL", "a camelCase key option", "an unknown option's value", "read as octal", "read as octal in a section",
        "a choice of one secret twice", "read as octal in a list", "a key inside a secret's value",
        "a secret named across the key and its value"])
def test_a_secret_typed_on_the_command_line_is_never_repeated(argv, tmp_path, monkeypatch, capsys, started):
    """Secrets go in the environment; one typed where a value goes is refused without being printed back."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, COMMAND_LINE_FILES)
    code, out, err = run_main([arg.replace("{tmp}", str(tmp_path)) for arg in argv], capsys)
    assert code == 2 and err.startswith("error: ") and not started, (code, out, err)
    assert SECRET not in out + err and OCTAL_SECRET not in out + err, err


@pytest.mark.parametrize("text", [
    f'name: t\nlogging: {{wandb: {{enabled: true, api_key: "{SECRET}}}}}\n',
    f"[default]\naws_access_key_id = AKIAXX\naws_secret_access_key = {SECRET}\n",
    f'name: t\nstorage: "s3://AKIAXX:{SECRET}@bucket/p\n',
    f"name: t\nstorage: [s3://AKIAXX:{SECRET}@bucket/p\n",
    f'name: t\nlogging: {{wandb: {{enabled: true, api_key: "{"x" * 80}{SECRET}"x}}}}\n',
    f'name: t\nlogging: {{wandb: {{enabled: true, api_key: "horse {SECRET}, battery\n',
], ids=["an unclosed quote", "an AWS credentials file", "a URI's password", "a URI's password in a list", "a long line YAML would cut",
        "blanks and commas in the value"])
def test_a_space_file_that_is_not_yaml_is_quoted_without_its_secrets(text, tmp_path, capsys, started):
    """YAML's own message would quote the line around the error (cut anywhere on a long line, so a secret's key may
    fall off): the file is named by line and column only."""
    (tmp_path / "space.yaml").write_text(text)
    code, out, err = run_main(["validate", str(tmp_path / "space.yaml")], capsys)
    assert code == 2 and "space.yaml: not valid YAML" in err and ", line " in err and not started, (code, out, err)
    assert SECRET not in out + err, err


@pytest.mark.parametrize("url", [f"hooks.slack.com/services/T0/B0/{SECRET}", f"https://hooks.slack.com/services/T0/B0/{SECRET} x", f"ftp://h/{SECRET}"])
def test_a_webhook_that_is_not_a_url_is_refused_without_being_shown(url, tmp_path, monkeypatch, capsys, started):
    """The notifier's URL is a secret: one that cannot be posted to stops the start, by the variable's name only."""
    monkeypatch.setenv("GRPO_SWEEP_SLACK_WEBHOOK", url)
    write_files(tmp_path, {"space.yaml": BASE})
    for command in ("validate", "run"):
        code, out, err = run_main([command, str(tmp_path / "space.yaml")], capsys)
        assert code == 2 and "GRPO_SWEEP_SLACK_WEBHOOK is not an http(s) URL" in err and not started, (code, out, err)
        assert SECRET not in out + err, err


@pytest.mark.parametrize("host", ["no.such.host.invalid", "192.0.2.1"])
def test_a_live_host_this_machine_cannot_listen_on_is_refused_before_anything_starts(host, tmp_path, monkeypatch, capsys, started):
    """A name that does not resolve, or an address of another machine (TEST-NET-1), with the token set."""
    monkeypatch.setenv("GRPO_SWEEP_LIVE_TOKEN", "a-token")
    write_files(tmp_path, {"space.yaml": BASE})
    code, out, err = run_main(["run", str(tmp_path / "space.yaml"), "--live-host", host], capsys)
    assert code == 2 and f"--live-host {host}: this machine cannot listen there" in err and not started, (code, out, err)


def test_run_refuses_a_folder_of_the_sweeps_name_that_holds_other_files(tmp_path, monkeypatch, capsys, started):
    """`run` (and `run --fresh`) never deletes what a user keeps at {storage}/{name}: refused before anything starts."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE, "results/t/important.txt": "my thesis data"})
    for fresh in ([], ["--fresh"]):
        code, out, err = run_main(["run", "space.yaml", *fresh], capsys)
        assert code == 2 and "is not a sweep's folder (it holds important.txt)" in err and "Traceback" not in out + err, err
        assert (tmp_path / "results" / "t" / "important.txt").read_text() == "my thesis data" and not started


def test_run_refuses_a_trial_this_machine_cannot_hold_before_the_bases(tmp_path, monkeypatch, capsys, started):
    """Without a cluster, `run` starts Ray here: a trial asking for more CPUs or GPUs than Ray will find is
    refused before the base evals (minutes), by Ray's own count of this machine."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    write_files(tmp_path, {"space.yaml": BASE})
    cases = {"cpus_per_trial=4096": "key 'resources.cpus_per_trial' = 4096: each trial asks for 4096 CPU, the Ray started on this machine would have"}
    if local_resources()["GPU"] == 0:  # a machine without a GPU (CI's)
        cases["gpus_per_trial=1"] = "key 'resources.gpus_per_trial' = 1: each trial asks for 1 GPU, the Ray started on this machine would have (Ray's own count) 0"
    for item, named in cases.items():
        code, out, err = run_main(["run", "space.yaml", "--set", f"resources.{item}"], capsys)
        assert_refused(code, out, err, (named,), tmp_path, started)


def test_run_refuses_multi_worker_trials_stopped_early_without_the_dashboard(tmp_path, monkeypatch, capsys, started):
    """Stopped before its last step (ASHA, the default scheduler; the zero-signal stopper), a multi-worker trial's
    workers' placement group is removed only through Ray's state API, which the dashboard serves
    (tests/sweep/test_multiworker_stopped.py): without it, refused before the bases. FIFO without the zero-signal
    stopper runs every trial to its end and needs no dashboard."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    write_files(tmp_path, {"space.yaml": BASE})
    two = ["--no-dashboard", "--set", "resources.workers_per_trial=2", "--set", "resources.cpus_per_trial=0.5"]
    fix = "--no-dashboard (or GRPO_SWEEP_DASHBOARD=0) keeps it off: drop it, or set workers_per_trial: 1, or scheduler.type: fifo"
    for extra, named in {(): "key 'resources.workers_per_trial' = 2 with scheduler.type = 'asha': a multi-worker trial stopped before",
                         ("--set", "stopping.zero_signal.enabled=true", "--set", "scheduler.type=median"):
                         "= 2 with scheduler.type = 'median' and stopping.zero_signal.enabled = true: "}.items():
        code, out, err = run_main(["run", "space.yaml", *two, *extra], capsys)
        assert_refused(code, out, err, (named, fix), tmp_path, started)
    with monkeypatch.context() as local:
        local.setenv("RAY_ADDRESS", "local")  # Ray's word for a Ray of its own started here
        code, out, err = run_main(["run", "space.yaml", *two], capsys)
        assert_refused(code, out, err, (fix,), tmp_path, started)
    code, out, err = run_main(["run", "space.yaml", *two, "--set", "scheduler.type=fifo"], capsys)
    assert code == 0 and started == ["environment", "bases", "base evals", "tune"], (code, err)
    started.clear()
    with socket.socket() as head:  # a cluster joined: its head's dashboard is its own, --no-dashboard changes nothing
        head.bind(("127.0.0.1", 0))
        head.listen()
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{head.getsockname()[1]}")
        code, out, err = run_main(["run", "space.yaml", *two], capsys)
    assert code == 0 and started == ["environment", "bases", "base evals", "tune"], (code, err)


def test_the_matrix_covers_each_kind_of_input_several_times():
    kinds = {}
    for case in CASES:
        kind = case.id.split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert set(kinds) == {"space", "storage", "command line"} and min(kinds.values()) >= 10, kinds


def test_validate_stays_offline_and_run_asks_the_bucket(s3_bucket, tmp_path, monkeypatch, capsys, started):
    """An endpoint that does not answer passes `validate` (no network there); `run` and `resume` name it, and a
    bucket that is not there, within seconds."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": with_storage(f"s3://bucket/p?endpoint_override={CLOSED}&scheme=http")})
    code, out, err = run_main(["validate", "space.yaml"], capsys)
    assert code == 0 and "ok" in out, err
    missing = f"s3://no-such-bucket/p?endpoint_override={s3_bucket.server.host_port}&scheme=http"
    code, out, err = run_main(["run", "space.yaml", "--storage", missing], capsys)
    assert_refused(code, out, err, ("there is no bucket 'no-such-bucket' at 127.0.0.1:",), tmp_path, started)
    code, out, err = run_main(["resume", "s3://no-such-bucket/p/t"], capsys)  # AWS_ENDPOINT_URL: the fixture's
    assert_refused(code, out, err, ("there is no bucket 'no-such-bucket'",), tmp_path, started)
    code, out, err = run_main(["resume", f"{s3_bucket.uri('p')}/t"], capsys)  # the bucket answers: nothing to resume there
    assert_refused(code, out, err, ("no sweep to resume here",), tmp_path, started)
    assert s3_bucket.keys() == []


# --- the mutation fuzzer
MUTANTS = 60
VALUES = [None, 0, -1, 2.5, 10**30, float("nan"), "", "nope", True, [], [1, "a"], {}, {"a": 1}, {"choice": []},
          {"loguniform": [1, 0]}, {"grid": [1, 2]}, {"uniform": [0, 1], "when": {"x": {"gt": 0}}}, "s3:/bucket", "1e-3"]


def _keys(node: object, path: tuple = ()) -> list[tuple]:
    """Every path to a mapping key or list item in a parsed YAML document."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    found = []
    for key, value in items:
        found.append((*path, key))
        found.extend(_keys(value, (*path, key)))
    return found


def mutate(text: str, rng: random.Random) -> tuple[str, str, str]:
    """(mutated text, what was done, the key's text that an error must name, or "" when it may validate)."""
    op = rng.choice(["drop", "retype", "misspell", "duplicate"])
    if op == "duplicate":  # a key line given again right after itself: the second would silently win
        lines = text.splitlines()
        candidates = [i for i, line in enumerate(lines) if not line.lstrip().startswith(("#", "-")) and ":" in line.split("#")[0]]
        i = rng.choice(candidates)
        key = lines[i].split(":")[0].strip()
        return "\n".join([*lines[: i + 1], lines[i], *lines[i + 1:]]) + "\n", f"duplicate line {i + 1}", f"appears twice (lines {i + 1} and {i + 2})"
    data = yaml.safe_load(text)
    path = rng.choice(_keys(data))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    if op == "drop":
        del parent[key]
    elif op == "retype" or isinstance(parent, list):
        parent[key] = copy.deepcopy(rng.choice(VALUES))
        op = "retype"
    else:
        spot = rng.randrange(len(str(key)))
        misspelt = str(key)[:spot] + rng.choice([c for c in "xq_" if c != str(key)[spot]]) + str(key)[spot + 1:]
        parent[misspelt] = parent.pop(key)
        return yaml.safe_dump(data, sort_keys=False), f"misspell {'.'.join(map(str, path))}", misspelt
    return yaml.safe_dump(data, sort_keys=False), f"{op} {'.'.join(map(str, path))}", ""


def mutants(tmp_path: Path, seed: int, count: int, make) -> Iterator[tuple[Path, str, str]]:
    """``count`` seeded mutants of the shipped space files, each written under ``tmp_path``: (its path, what
    was done, the text an error about it must hold)."""
    rng = random.Random(seed)
    for i in range(count):
        shipped = rng.choice(SHIPPED_SPACES)
        # written elsewhere: the file's relative paths (relative to it) and its storage made absolute
        text = shipped.read_text().replace("storage: sweep_results", f"storage: {tmp_path / 'results'}").replace("../../", f"{ROOT}/")
        mutant, what, must_name = make(text, rng)
        path = tmp_path / f"mutant{i}_{shipped.name}"
        path.write_text(mutant)
        yield path, f"{shipped.name}: {what}", must_name


def test_mutated_shipped_spaces_validate_or_are_named(tmp_path, monkeypatch, capsys, started):
    """60 seeded mutants of the shipped space files (a key dropped, retyped, misspelt or given twice): each
    validates cleanly or is refused with a named error, exit 2 and no traceback, and `run` refuses it too; a
    duplicate or misspelt key is always refused. (Type changes alone: the next test, where all are refused.)"""
    monkeypatch.chdir(tmp_path)
    outcomes = {0: 0, 2: 0}
    for path, what, must_name in mutants(tmp_path, 60, MUTANTS, mutate):
        code, out, err = run_main(["validate", str(path)], capsys)
        context = f"{what}\n{out}{err}"
        assert code in (0, 2) and "Traceback" not in out + err, context
        assert code == 0 or (err.startswith(f"error: {path}") and must_name in err), context
        assert code == 2 or not must_name, context  # a duplicate or a misspelt key never passes
        outcomes[code] += 1
        if code == 2:
            code, out, err = run_main(["run", str(path)], capsys)
            assert_refused(code, out, err, (str(path), must_name), tmp_path, started)
    assert outcomes[0] and outcomes[2] > MUTANTS / 2, outcomes  # both outcomes happen; most mutants are refused


TYPE_MUTANTS = 40
DISTRIBUTION_WORDS = {"uniform", "loguniform", "quniform", "randint", "choice", "grid"}


def wrong_type(value: object) -> object:
    """A value of another type that lax parsing used to accept or silently replace: true for a number, a number
    for true/false or for text, a whole number written 4.0, a list for a section."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value) if value >= 0 else True
    if isinstance(value, float):
        return True
    if isinstance(value, str):
        return 7
    return [1]  # a mapping or a list


def named_key(path: tuple) -> str:
    """The dotted key an error about ``path`` names: up to the first list item or distribution word."""
    parts = []
    for part in path:
        if isinstance(part, int) or part in DISTRIBUTION_WORDS:
            break
        parts.append(str(part))
    if parts[-1] == "type" and len(parts) > 1:  # a union's tag: the error names the section it chooses (its value quoted)
        parts.pop()
    return ".".join(parts)


def retype(text: str, rng: random.Random) -> tuple[str, str, str]:
    """(mutated text, what was done, the key an error must name): one value or section given the wrong type."""
    data = yaml.safe_load(text)
    candidates = [p for p in _keys(data) if "when" not in p and p[-1] not in DISTRIBUTION_WORDS]
    path = rng.choice(candidates)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    old = parent[path[-1]]
    if isinstance(old, int) and not isinstance(old, bool) and isinstance(parent, dict) and named_key(path).split(".")[-1] not in INTEGER_KEYS:
        old = 1.5  # 4 -> 4.0 is wrong for a whole number only: elsewhere give a number true instead
    parent[path[-1]] = wrong_type(old)
    return yaml.safe_dump(data, sort_keys=False), f"{'.'.join(map(str, path))}: {old!r} -> {parent[path[-1]]!r}", named_key(path)


def _integer_keys() -> set[str]:
    """Names of the config fields typed as whole numbers (where 4.0 must be refused)."""
    from grpo.config import TrainerConfig
    from sweep.spec.config import SweepConfig

    found = set()

    def walk(model) -> None:
        for name, info in model.model_fields.items():
            if info.annotation in (int, int | None):
                found.add(name)
            for inner in _models(info.annotation):
                walk(inner)

    def _models(annotation) -> list:
        from typing import get_args

        from pydantic import BaseModel

        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in get_args(annotation) for m in _models(arg)]

    walk(TrainerConfig)
    walk(SweepConfig)
    return found


INTEGER_KEYS = _integer_keys()


def test_type_changes_in_shipped_spaces_are_each_refused_by_name(tmp_path, monkeypatch, capsys, started):
    """40 seeded mutants of the shipped space files, each giving one value or section the wrong type (true for
    a number, a number for true/false or text, 4.0 for a whole number, a list for a section): every one is refused
    by ``validate`` and ``run``, naming the file and the key, exit 2, nothing started."""
    monkeypatch.chdir(tmp_path)
    for path, what, key in mutants(tmp_path, 33, TYPE_MUTANTS, retype):
        code, out, err = run_main(["validate", str(path)], capsys)
        context = f"{what}\n{out}{err}"
        assert code == 2 and err.startswith(f"error: {path}") and f"'{key}" in err and "Traceback" not in out + err, context
        code, out, err = run_main(["run", str(path)], capsys)
        assert_refused(code, out, err, (str(path), f"'{key}"), tmp_path, started)


# --- a start refused or crashed after its folder was written
def test_a_start_refused_after_its_folder_was_written_leaves_nothing(tmp_path, monkeypatch, capsys, started):
    """`run` refused after it wrote sweep_config.json (resources checked against the Ray it started): the folder goes,
    so the next `run` is not told to resume, and `resume` is not asked to continue a sweep that never began."""
    import sweep.run

    def refuse(cfg, store, make_tuner, watch):
        started.append("tune")
        raise ConfigError("resources: key 'resources.cpus_per_trial' = 64: each trial asks for 64 CPU, the Ray cluster has 2; lower it")

    monkeypatch.setattr(sweep.run, "_fit_and_report", refuse)
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE})
    for _ in range(2):  # the second run gets as far as the first: nothing blocks it
        code, out, err = run_main(["run", "space.yaml"], capsys)
        assert code == 2 and "cpus_per_trial' = 64" in err and "already exists" not in err, err
        assert not (tmp_path / "results" / "t").exists()
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 2 and "start one with `python -m sweep run SPACE`" in err


def test_a_crashed_start_leaves_nothing_and_a_begun_sweep_stays(tmp_path, monkeypatch, capsys, started):
    import sweep.trials.base_evals

    def crash(cfg, store):
        raise RuntimeError("the base eval died")

    monkeypatch.setattr(sweep.trials.base_evals, "evaluate_bases", crash)
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE, "results/t/base_evals/x": "partial"})
    with pytest.raises(RuntimeError):
        main(["run", "space.yaml"])
    assert not (tmp_path / "results" / "t").exists()
    write_files(tmp_path, {"results/t/tuner.pkl": "", "results/t/sweep_config.json": "{}"})
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 2 and "already exists" in err and "python -m sweep resume" in err
    assert (tmp_path / "results" / "t" / "tuner.pkl").exists()  # a sweep Tune began is never removed by a refusal


@pytest.mark.parametrize("how", [RuntimeError("the base policy's build died"), KeyboardInterrupt()], ids=["failed", "ctrl-c"])
def test_a_sweep_fresh_replaces_stays_whole_until_the_new_bases_are_ready(tmp_path, monkeypatch, capsys, started, how):
    """`run --fresh` deleted the old sweep first, then built the bases (10-17 minutes where none ships): a build that
    failed, or Ctrl-C meanwhile, left neither sweep. Now the old one goes once the bases are ready."""
    import sweep.trials.base_evals

    old = {"space.yaml": BASE, "results/t/tuner.pkl": "state", "results/t/sweep_config.json": "{}", "results/t/trial_1/result.json": "{}\n"}
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, old)

    def stopped(cfg):
        raise how

    monkeypatch.setattr(sweep.trials.base_evals, "build_bases", stopped)
    if isinstance(how, KeyboardInterrupt):
        code, out, err = run_main(["run", "space.yaml", "--fresh"], capsys)
        assert code == 130 and "interrupted (SIGINT)" in err, (code, err)
    else:
        with pytest.raises(RuntimeError):
            main(["run", "space.yaml", "--fresh"])
    assert sorted(p.name for p in (tmp_path / "results" / "t").iterdir()) == ["sweep_config.json", "trial_1", "tuner.pkl"]
    assert (tmp_path / "results" / "t" / "tuner.pkl").read_text() == "state"
    monkeypatch.setattr(sweep.trials.base_evals, "build_bases", lambda cfg: started.append("bases"))
    code, out, err = run_main(["run", "space.yaml", "--fresh"], capsys)
    assert code == 0 and started == ["environment", "environment", "bases", "base evals", "tune"], (code, err)
    assert not (tmp_path / "results" / "t" / "trial_1").exists() and not (tmp_path / "results" / "t" / "tuner.pkl").exists()


def test_a_confirm_sweep_that_crashes_at_its_start_leaves_nothing_either(tmp_path, monkeypatch, started):
    """`sweep confirm` starts its sweep through run_sweep, with the first sweep's base evals copied in: a crash
    before Tune began removes the new folder (copied evals and all), never the first sweep's."""
    import sweep.trials.base_evals
    from sweep.run import run_sweep
    from sweep.spec.loader import load_space

    def crash(cfg, store):
        assert store.exists("t_confirm", "base_evals", "x", "aggregated_results.jsonl")  # copied in before the evals
        raise RuntimeError("the base eval died")

    monkeypatch.setattr(sweep.trials.base_evals, "evaluate_bases", crash)
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE.replace("name: t", "name: t_confirm"), "results/t/base_evals/x/aggregated_results.jsonl": "{}\n"})
    with pytest.raises(RuntimeError):
        run_sweep(load_space(tmp_path / "space.yaml"), base_evals_from="t")
    assert not (tmp_path / "results" / "t_confirm").exists()
    assert (tmp_path / "results" / "t" / "base_evals" / "x" / "aggregated_results.jsonl").exists()


def test_run_starts_over_in_a_failed_start_and_says_so(tmp_path, monkeypatch, capsys, started):
    """A folder left by an earlier version's failed start (its config, no tuner state): `resume` points to `run`,
    and `run` agrees: it starts over there."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE, "results/t/sweep_config.json": "{}"})
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 2 and "no sweep to resume here" in err and "python -m sweep run" in err
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 0, err
    assert "a start that failed before its first trial" in out and "starting over there" in out
    assert started == ["environment", "bases", "base evals", "tune"]
    assert json.loads((tmp_path / "results" / "t" / "sweep_config.json").read_text())["name"] == "t"


# --- sweep envs check goes on past bad tasks
def test_envs_check_names_every_bad_task_and_checks_the_rest(tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(task_line(env_key="hotle") + "{oops\n" + task_line(task_key="b", verifier=None) + task_line(task_key="good"))
    (tmp_path / "binary.jsonl").write_bytes(b"\x00\x01")
    kept = tmp_path / "kept.jsonl"
    code, out, err = run_main(["envs", "check", str(tasks), str(tmp_path / "binary.jsonl"), str(tmp_path / "none.jsonl"),
                               "--write", str(kept)], capsys)
    assert code == 2 and "Traceback" not in out + err
    for named in ("tasks.jsonl:1 (task 'hotel-book_id-00'): key 'env_key' = 'hotle' is not a local app", "tasks.jsonl:2: not valid JSON",
                  "tasks.jsonl:3 (task 'b'): give exactly one of", "binary.jsonl: a binary file", "none.jsonl: no such file",
                  "5 task record(s) or file(s) not checked (above); 1 task(s) checked"):
        assert named in err, err
    assert "hotel" in out and [json.loads(line)["task_key"] for line in kept.read_text().splitlines()] == ["good"]


def test_output_into_a_pipe_closed_early_is_no_traceback(tmp_path):
    """`sweep validate space.yaml | head -1`: the reader closes the pipe; the command stops quietly (exit 141, as a shell
    counts SIGPIPE), no BrokenPipeError traceback."""
    write_files(tmp_path, {"space.yaml": BASE})
    child = subprocess.Popen([sys.executable, "-m", "sweep", "validate", str(tmp_path / "space.yaml")], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_broken_pipe_that_is_not_standard_output_is_shown(monkeypatch):
    """Only a closed standard output is the quiet exit 141: a socket broken under a command is an error to show."""
    import socket

    import sweep.__main__ as cli

    def writes_to_a_closed_socket(args):
        mine, theirs = socket.socketpair()
        theirs.close()
        while True:
            mine.send(b"x" * 65536)

    monkeypatch.setattr(cli, "_cmd_validate", writes_to_a_closed_socket)
    with pytest.raises(BrokenPipeError):
        cli.main(["validate", "space.yaml"])
