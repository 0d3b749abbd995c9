"""Validation of whymiss's JSON outputs against docs/report.schema.json (JSON Schema 2020-12,
Debian python3-jsonschema). validate(doc, "report" | "simulate" | "diff") returns a list of
error strings, empty when the document is valid against both that output's schema and the
top-level one."""
import json
import os

import jsonschema

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "report.schema.json")
KINDS = ("report", "simulate", "diff", "view")

_validators = {}


def _validator(which):
    if which not in _validators:
        with open(SCHEMA_PATH) as f:
            schema = json.load(f)
        cls = jsonschema.Draft202012Validator
        cls.check_schema(schema)
        if which is not None:  # the same $defs, rooted at one output
            schema = {"$schema": schema["$schema"], "$ref": f"#/$defs/{which}", "$defs": schema["$defs"]}
        _validators[which] = cls(schema)
    return _validators[which]


def validate(doc, which):
    assert which in KINDS, which
    errors = []
    for v in (_validator(which), _validator(None)):
        for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(p) for p in e.absolute_path)
            errors.append(f"{which} at /{path}: {e.message[:300]}")
    return errors
