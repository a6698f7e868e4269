"""`kernelwright runs show RUN --ask ID`: one stored ask, printed as plain text.

A completion ask is printed message by message exactly as the model read it (the prompt is
stored before anyone answers it), followed by the answer when there is one; an evaluation ask
shows the candidate it judged and the condensed result; a sweep (the tuning step's many instances
in one evaluation) each configuration's status and time; a seeds ask the configurations the seed
cache gave. `--ask list` lists every ask.
"""
from __future__ import annotations

import json

import typer

from . import exits


def show_ask(store, run_id: str, ask_id: str) -> int:
    asks = store.asks(run_id)
    if ask_id == "list":
        for row in asks:
            what = row["agent"] or row["candidate_id"] or row["payload"].get("of") or row["payload"].get("job_id") or ""
            state = "answered" if row["result"] is not None else "waiting"
            typer.echo(f"{row['id']}\t{row['kind']}\t{what}\t{state}")
        return exits.EXIT_OK
    row = next((a for a in asks if a["id"] == ask_id), None)
    if row is None:
        known = ", ".join(a["id"] for a in asks[:20]) or "none"
        typer.echo(f"run {run_id} has no ask {ask_id!r} (asks: {known}{', ...' if len(asks) > 20 else ''})", err=True)
        return exits.EXIT_FAILED
    payload = row["payload"]
    if payload.get("type") == "completion":
        _print_completion(payload, row["result"])
    elif payload.get("type") in ("sweep", "seeds"):
        _print_tuning(payload, row["result"])
    else:
        _print_evaluation(payload, row["result"])
    return exits.EXIT_OK


def _print_completion(payload: dict, result: dict | None) -> None:
    request = payload.get("request") or {}
    messages = request.get("messages") or []
    typer.echo(f"# ask {payload['id']}: {payload.get('agent')} prompt of job {payload.get('job_id', '')} "
               f"({len(messages)} messages, max_tokens {request.get('max_tokens')}, "
               f"temperature {request.get('temperature')})")
    for index, message in enumerate(messages, start=1):
        typer.echo(f"\n## Message {index} of {len(messages)}: {message.get('role')}\n")
        typer.echo(message.get("content", ""))
    if result is None:
        typer.echo("\n## Answer\n\n(not answered yet)")
    elif result.get("type") == "completion":
        typer.echo(f"\n## Answer ({result.get('model', '?')})\n\n{result.get('text', '')}")
    else:
        typer.echo(f"\n## No answer: {result.get('kind')}: {result.get('message', '')}")


def _print_evaluation(payload: dict, result: dict | None) -> None:
    typer.echo(f"# ask {payload['id']}: evaluation of {payload.get('candidate_id')}"
               + (" (profile asked for)" if payload.get("profile") else ""))
    typer.echo("\n```python\n" + payload.get("code", "").rstrip() + "\n```")
    typer.echo("\n## Result\n")
    typer.echo(json.dumps(result, indent=1, sort_keys=True) if result is not None else "(not judged yet)")


def _print_tuning(payload: dict, result: dict | None) -> None:
    if payload.get("type") == "seeds":
        typer.echo(f"# ask {payload['id']}: the tuning seeds of job {payload.get('job_id', '')} on "
                   f"{payload.get('device')} (at most {payload.get('limit')})")
        configs = (result or {}).get("configs")
        typer.echo("\n" + ("\n".join(json.dumps(c, sort_keys=True) for c in configs) if configs else
                           "(none)" if result is not None else "(not answered yet)"))
        return
    instances = payload.get("instances") or []
    typer.echo(f"# ask {payload['id']}: a sweep of {len(instances)} instances of {payload.get('of')}'s template "
               f"(job {payload.get('job_id', '')}), one evaluation")
    if result is None or result.get("type") != "sweep":
        typer.echo("\n" + (json.dumps(result, indent=1) if result is not None else "(not judged yet)"))
        return
    record = result.get("record") or {}
    typer.echo(f"\n{record.get('timing_note', '')}\n")
    for config in record.get("configs") or []:
        time = f"{config['time_ms']:.4g} ms" if config.get("time_ms") is not None else ""
        typer.echo(f"#{config.get('index')}\t{config.get('status')}\t{time}\t{json.dumps(config.get('params'))}"
                   f"\t{(config.get('reason') or '')[:200]}")
    if record.get("ended_early"):
        typer.echo(f"\nended early: {record['ended_early']}")
