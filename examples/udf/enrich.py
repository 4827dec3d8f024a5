#!/usr/bin/env python3
# A UDF in Python: adds the length and the upper-case form of each record's `word`, and drops
# records without one. Run by examples/udf/python_udf.toml.
import streamctl_udf


def enrich(record):
    word = record.get("word")
    if not isinstance(word, str):
        return None
    return {**record, "length": len(word), "upper": word.upper()}


streamctl_udf.run(enrich)
