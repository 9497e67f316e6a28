"""Write the synthetic request bodies in captures/: one per client shape toolslim must handle.

Stdlib only and deterministic: every value is a literal, so two runs give identical bytes.
Usage: python captures/make_captures.py [--out DIR]   (DIR defaults to this file's folder)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

JSON = Any
HERE = Path(__file__).resolve().parent
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def dumps_compact(value: JSON) -> bytes:
    """Serialize like JSON.stringify, serde_json and httpx>=0.28: no spaces, raw UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps_python_default(value: JSON) -> bytes:
    """Serialize with `json.dumps` defaults: `", "` and `": "` separators, ASCII-only escapes."""
    return json.dumps(value).encode("ascii")


# Claude Code style: Anthropic Messages API, zod-generated draft-07 input schemas.


def zod_object(properties: dict[str, JSON], required: list[str]) -> dict[str, JSON]:
    """An object schema in the key order zod-to-json-schema emits, `$schema` last.

    Like zod-to-json-schema, an object with no required property has no `required` key.
    """
    schema: dict[str, JSON] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    schema["$schema"] = DRAFT_07
    return schema


def anthropic_tool(name: str, description: str, input_schema: dict[str, JSON]) -> dict[str, JSON]:
    return {"name": name, "description": description, "input_schema": input_schema}


def string(description: str, **extra: JSON) -> dict[str, JSON]:
    return {"type": "string", "description": description, **extra}


def number(description: str, **extra: JSON) -> dict[str, JSON]:
    return {"type": "number", "description": description, **extra}


def boolean(description: str, **extra: JSON) -> dict[str, JSON]:
    return {"type": "boolean", "description": description, **extra}


BASH_DESCRIPTION = """\
Runs a shell command in a persistent bash session. The session keeps its working directory \
and exported variables between calls, and every call may set its own timeout.

Use this tool for terminal work: running builds, test suites, package managers, linters, \
version control and one-off scripts. Do NOT use it to read, search, create or edit files — \
Read, Grep, Glob, Write and Edit exist for that and produce output the user can review.

Before you run a command:

1. Check the directory
   - If the command will create files or folders, first use LS to confirm that the parent \
folder exists and is the one you mean.
   - Example: before `mkdir -p build/reports`, list the project root and check that you are \
inside the repository and not in your home directory.

2. Quote carefully
   - Wrap every path that contains spaces or shell metacharacters in double quotes.
   - Good: cd "/home/ana/My Projects/ledger"
   - Bad: cd /home/ana/My Projects/ledger   (the shell sees three arguments)
   - Good: python "/srv/data/2024 export/convert.py"
   - Bad: python /srv/data/2024 export/convert.py

Usage notes:
  - The command argument is required.
  - An optional timeout in milliseconds may be given, up to 600000 (10 minutes). Without one, \
a command is stopped after 120000 ms (2 minutes).
  - Give every call a short description (5–10 words) saying what the command does, so the user \
can follow along in the transcript.
  - Output longer than 30000 characters is cut; the beginning and the end are kept. Redirect \
long output to a file and search it with Grep when you need all of it.
  - Set run_in_background to true for servers, watchers and other long jobs. You receive a \
shell id at once; read new output with BashOutput and stop the job with KillShell. Do not add \
a trailing '&' yourself, and do not use 'sleep' to wait for a background job.
  - Prefer the dedicated tools over these commands: find and ls (use Glob or LS), grep and rg \
(use Grep), cat, head and tail (use Read), sed and awk (use Edit), echo > file and heredocs \
(use Write). If you really must search from the shell, use rg, which respects .gitignore.
  - Separate dependent commands with '&&' so that a failure stops the chain; use ';' only when \
later commands must run whatever happened earlier. Never put a newline between commands, \
except inside a quoted string.
  - Independent commands (for example `git status` and `git diff`) can be sent as several Bash \
calls in one message; they then run in parallel and you save a round trip.
  - Keep the working directory stable: use absolute paths instead of `cd` unless the user asks \
you to change directory.
    <good-example>
    python -m pytest /home/dev/ledger/tests/test_rounding.py -q
    </good-example>
    <bad-example>
    cd /home/dev/ledger && python -m pytest tests/test_rounding.py -q
    </bad-example>

# Sandbox and permissions

Commands run inside a sandbox by default. It allows reading most of the filesystem, writing \
inside the working directory and the system temporary folder, and no network access except \
to the package registries the user has allowed.

- When a command fails with "Operation not permitted", "Read-only file system" or a \
connection error, the sandbox is the likely cause. Do not try to work around it with other \
tools or with clever shell tricks.
- Instead, run the same command again with dangerouslyDisableSandbox set to true and explain \
in the description why it needs more access; the user is then asked to approve it.
- Never disable the sandbox for commands that delete files outside the project, change \
system configuration, or send data to hosts the user did not mention.
- Commands that only read (git log, ls, cat of a log file, pytest --collect-only) never need \
the sandbox disabled; if one fails, look for the real error first.

# Long-running processes

- Development servers, file watchers and `docker compose up` never exit by themselves. Start \
them with run_in_background and check their output with BashOutput until they report that \
they are ready (for example "Listening on http://127.0.0.1:8000").
- Test suites and builds usually finish; run them in the foreground with a timeout that fits \
the project. A full build of a large project can take several minutes, so raise the timeout \
rather than splitting the build into pieces.
- Stop background processes with KillShell when you no longer need them, and always before \
you tell the user the task is done.

# Reading command output

- Exit codes matter: a command that printed nothing but exited non-zero has failed. Report \
the failure to the user instead of assuming success.
- Many tools print warnings to stderr even when they succeed; both streams are shown to you, \
stderr after stdout.
- When output is cut, rerun the command with a narrower scope (one test file, one package) \
instead of reading the truncated output again.

# Project tooling

Use the project's own entry points rather than bare tools, so that the right versions and \
settings apply:
- Python: if the repository has uv.lock, run `uv run pytest`; with poetry.lock, `poetry run \
pytest`; with a tox.ini or noxfile.py, look at which environments exist before picking one. \
A Makefile or justfile target (`make test`, `just lint`) usually wraps all of this — read it \
first.
- JavaScript and TypeScript: use the scripts in package.json (`npm run test`, `pnpm lint`) \
with the package manager whose lock file is present; do not mix them.
- Rust: `cargo test -p CRATE` for one crate of a workspace; `cargo clippy --all-targets` \
before you report that you are done.
- Go: `go test ./...` from the module root; `go vet ./...` catches common mistakes.
- Never install global packages or change the user's shell profile. If a tool is missing, \
say which one and how the project expects it to be installed.

# Secrets

- Never print secrets: do not `cat` .env files, credential stores or key files, and do not \
run `env` or `printenv` without filtering out tokens. If you need to know whether a variable \
is set, test for it: `test -n "$DATABASE_URL" && echo set`.
- Never pass tokens on the command line where they end up in shell history and process \
lists; use the environment or a file the tool reads.
- If a command's output unexpectedly contains a secret, do not repeat it in your reply and \
tell the user so they can rotate it.

# Debugging a failing command

1. Read the whole error, not only the last line: the first error is usually the cause and \
the rest are consequences.
2. Reproduce with the smallest command that fails — one test, one file, one package.
3. Check your assumptions with cheap commands: which interpreter (`command -v python`), \
which version of a tool, which branch, which environment variables are set (`env | sort | \
grep -i proxy`).
4. Change one thing at a time and rerun. If two attempts with different fixes fail the same \
way, stop and re-read the code instead of trying a third variant.
5. When you cannot find the cause, tell the user what you tried and what you observed; do \
not claim a fix you could not verify.

# Examples

<example>
Task: find out why the integration tests fail only in CI.
Good: run `git diff origin/main --stat` and the failing test file in parallel, then run the \
single failing test with `-x -vv` and read the first traceback.
Bad: rerun the whole suite three times hoping the failure goes away.
</example>

<example>
Task: check which Python the project uses.
Good: read .python-version or the requires-python field with Read, then run \
`uv run python --version`.
Bad: `python --version`, which reports whatever interpreter is first on PATH.
</example>

<example>
Task: clean up build artefacts.
Good: `rm -rf /home/dev/ledger/build /home/dev/ledger/dist` after LS confirmed both are inside the \
project.
Bad: `rm -rf build/*` from a directory you did not check, or any `rm -rf` with a variable \
that might be empty.
</example>

# Committing changes with git

Only create a commit when the user asks for one. If it is unclear whether they want one, ask \
first — an unwanted commit is more annoying than a question. When you are asked to commit:

1. Send these commands in one message so they run in parallel:
   - `git status` to list untracked files (never pass -uall; it can be slow on large trees).
   - `git diff HEAD` to see both staged and unstaged changes.
   - `git log -n 10 --oneline` to learn the message style this repository uses.
2. Read the result and draft a message:
   - Summarize what kind of change it is (feature, fix, refactor, tests, docs, build) and why \
it was made, in one or two sentences. "Add" means something new, "Update" an improvement, \
"Fix" a bug fix.
   - Do not commit files that look like secrets (.env, credentials.json, *.pem); warn the user \
if they asked you to.
   - Follow the repository's conventions for prefixes, tense and line length.
3. Stage the relevant files by name, create the commit, then run `git status` to confirm that \
it worked. Pass the message through a heredoc so that quoting survives:
   <example>
   git add src/ledger/rounding.py tests/test_rounding.py && git commit -m "$(cat <<'EOF'
   Fix half-even rounding of negative amounts

   Credit notes were rounded away from zero, which made totals drift by a cent.
   EOF
   )"
   </example>
4. If a pre-commit hook fails, fix the problem it reports and create a NEW commit; never \
amend, because the failed commit did not happen and amending would change the previous one. \
If a hook only reformatted files, stage them and commit again once.

Important:
  - Never change git config.
  - Never push, force-push or rebase unless the user explicitly asks for it.
  - Never pass -i (git rebase -i, git add -i); interactive commands cannot get input here.
  - If there is nothing to commit, say so instead of creating an empty commit.
  - Do not use the TodoWrite or Task tools while committing.
  - Never use `git reset --hard`, `git checkout -- .`, `git clean -fd` or `git stash drop` \
unless the user asked for exactly that: they throw away work that cannot be recovered.
  - If the user has uncommitted changes you did not make, leave them alone; stage only the \
files you changed.
  - Do not bypass hooks with --no-verify; a failing hook is information.

# Creating pull requests

Use the gh command for everything on GitHub: issues, pull requests, checks and releases. If \
the user gives you a GitHub URL, use gh to fetch what it points to.

When asked to open a pull request:

1. In one message, run in parallel: `git status`, `git diff`, `git log` and \
`git diff <base-branch>...HEAD`, and check whether the branch tracks a remote and is up to \
date with it.
2. Look at EVERY commit that will be in the pull request, not only the newest one, and draft \
a title and a summary from all of them.
3. In one message, run in parallel: create the branch if needed, push it with -u if it has \
no upstream, and create the pull request with a heredoc body:
   <example>
   gh pr create --title "Fix half-even rounding of negative amounts" --body "$(cat <<'EOF'
   ## Summary
   - Round credit-note lines half-even, like invoice lines
   - Add regression tests for negative totals

   ## Test plan
   - [x] python -m pytest tests/test_rounding.py
   - [ ] Compare a month of exported totals with the previous release
   EOF
   )"
   </example>

Return the pull request URL when you are done so the user can open it.

# Other common operations
- Read the comments of a pull request: gh api repos/OWNER/REPO/pulls/NUMBER/comments
- See why a check failed: gh run view RUN_ID --log-failed
- Check the status of a pull request's checks: gh pr checks NUMBER
- Show an issue with its comments: gh issue view NUMBER --comments
- Find the pull request for the current branch: gh pr view --json number,url,state
"""

TASK_DESCRIPTION = """\
Starts a sub-agent that works on a complex, multi-step task on its own and reports back once.

Sub-agents have their own context window, so a long search or a wide investigation does not \
fill yours. Each sub-agent type has its own instructions and tool set:

- general-purpose: Researches open questions, searches code and carries out multi-step tasks. \
Use it when you are looking for a keyword or a file and are not sure the first few searches \
will find it. (Tools: all)
- code-reviewer: Reviews a finished change against the project's conventions and reports \
bugs, missing tests and risky edits, most serious first. Use it after you have written or \
changed a meaningful amount of code. (Tools: Read, Grep, Glob, LS, Bash)
- test-runner: Runs the relevant test suites for a change, reads the failures and proposes \
minimal fixes without applying them. (Tools: Bash, Read, Grep, Glob)
- docs-writer: Writes or updates README sections, docstrings and changelog entries that match \
a change, in the project's existing voice. (Tools: Read, Write, Edit, MultiEdit, Glob, Grep)
- security-auditor: Reads a change or a module with an attacker's eyes: injection, path \
traversal, unsafe deserialization, secrets in code or logs, missing authorization checks, and \
dependencies with known advisories. Reports findings with file:line, severity and a concrete \
fix. Use it proactively when a change touches authentication, file uploads, shell commands or \
anything parsing untrusted input. (Tools: Read, Grep, Glob, LS, WebFetch)
- perf-investigator: Profiles a slow code path, reads the profile and proposes the smallest \
change with the largest effect, with before-and-after numbers measured in the same run. Use \
it when the user says something is slow and nobody knows why yet. (Tools: Bash, Read, Grep, \
Glob, Write)
- migration-planner: Plans a large mechanical change — a framework upgrade, a renamed \
module, a replaced library — by inventorying every affected call site, grouping them into \
safe steps and listing what must be tested after each step. It never edits code. \
(Tools: Read, Grep, Glob, LS, Bash)
- dependency-updater: Updates one dependency at a time, reads its changelog for breaking \
changes, adapts the code and runs the tests after each update. Use it when the user asks to \
bring dependencies up to date. (Tools: all)
- statusline-setup: Configures the terminal status line from the user's settings. \
(Tools: Read, Edit)
- output-style-setup: Creates a custom output style from the user's description of how \
answers should look. (Tools: Read, Write, Edit, Glob, LS, Grep)

Pass the name of one of these in subagent_type.

When NOT to use a sub-agent:
- To read a file whose path you already know — use Read, it is faster.
- To find a class or function definition such as "class Ledger" — use Glob or Grep.
- To search inside two or three known files — use Read on each.
- For anything unrelated to the agent descriptions above.

Usage notes:
1. Start several sub-agents at once when the tasks are independent: put several Task calls in \
one message.
2. A sub-agent's final message comes back to you, not to the user. Summarize it for the user \
in your own words.
3. Every invocation is stateless: you cannot send a sub-agent follow-up messages, and it \
cannot ask you questions. Write a prompt that stands on its own: say exactly what to do, \
which files or areas matter, and what the final report must contain.
4. Trust a sub-agent's findings in general, but verify claims that decide what you do next.
5. Tell the sub-agent whether it may change code or should only research; it cannot know \
what the user asked you.
6. If an agent description says it should be used proactively, use it without waiting for \
the user to ask.
7. When a sub-agent reports that it changed files, read the changed regions yourself before \
you tell the user the work is done; you are responsible for the result.
8. Do not start a sub-agent for work you are about to do yourself anyway, and never start \
two sub-agents that edit the same files at the same time.

How results come back:
- You receive the sub-agent's last message only, as the tool result. Intermediate tool \
calls, file contents it read and commands it ran are not included.
- Ask for evidence in the final message — paths with line numbers, command output excerpts, \
measured numbers — so you can check a claim without redoing the work.
- Sub-agents may run for several minutes. Start independent work of your own in the same \
message instead of waiting idly.

What sub-agents cannot do:
- They cannot see this conversation, the user's earlier messages or files you only read \
into your own context; repeat what they need.
- They cannot ask the user for approval; a sub-agent that needs a permission the user has \
not granted stops and reports that instead.
- They cannot start further sub-agents.

Writing a good prompt:
- Start with the goal in one sentence, then the context the agent cannot see: the user's \
words, the files you already read, what you ruled out.
- Say what to return: a list of file:line locations, a yes/no with evidence, a patch, a \
table of numbers. The agent's final message is all you will get.
- Set limits when they matter: "do not edit files", "stay inside src/billing", "stop after \
the first confirmed cause".
- Mention conventions the agent must follow (test command, formatter, commit rules) when it \
may change code.

Example:

<example>
user: "Please write a function that checks whether an IBAN is valid"
assistant: Writes the function with the Write tool and adds tests.
<commentary>
A meaningful piece of code was written, so the code-reviewer agent should look at it.
</commentary>
assistant: Uses the Task tool with subagent_type "code-reviewer" and a prompt naming the new \
files and what they are meant to do.
</example>

<example>
user: "Our nightly export got three times slower last week"
<commentary>
Nobody knows the cause yet and finding it needs measurements, so the perf-investigator agent \
fits. A git log of last week can run at the same time.
</commentary>
assistant: In one message, uses the Task tool with subagent_type "perf-investigator" (prompt: \
the export command, the data set to use, and a request for the three most expensive call \
paths with timings) and the Bash tool with `git log --since='2 weeks ago' --oneline`.
</example>

<example>
user: "We're moving from requests to httpx — how big is that job?"
<commentary>
The user asked for an estimate, not for edits, so the migration-planner agent is right; it \
never changes code.
</commentary>
assistant: Uses the Task tool with subagent_type "migration-planner" and asks for every call \
site grouped by module, the features of requests each one relies on (sessions, adapters, \
retries, streaming), and a proposed order of steps.
</example>
"""

TODO_DESCRIPTION = """\
Creates and updates a structured task list for the current session. It helps you keep track \
of multi-step work and shows the user how far along you are.

## When to use this tool

Use it proactively when:

1. The task needs three or more distinct steps.
2. The task is non-trivial and needs planning, even if it is one request.
3. The user asks for a todo list explicitly.
4. The user gives several tasks at once, numbered or separated by commas.
5. New instructions arrive while you work — add them as todos right away.
6. You start a task — mark it in_progress BEFORE you begin. Ideally only one task is in \
progress at any time.
7. You finish a task — mark it completed and add any follow-up tasks you discovered.

## When NOT to use this tool

Skip it when:
1. There is a single, simple task.
2. The task is trivial and tracking it gives no benefit.
3. It can be done in fewer than three simple steps.
4. The request is conversational or purely informational.

If there is only one trivial task, just do it.

## Examples of when to use the todo list

<example>
User: Add a --dry-run flag to the import command and make sure the tests still pass.
Assistant: I'll add the flag and keep the tests green. Let me plan this:
*Creates todos: 1. Add --dry-run to the argument parser 2. Skip database writes when the flag \
is set 3. Print what would be imported 4. Add tests for the flag 5. Run the test suite*
<reasoning>
1. The change touches the parser, the import logic and the tests.
2. The user asked for passing tests, so running them is an explicit step.
3. Tracking the steps makes it obvious when the work is done.
</reasoning>
</example>

<example>
User: Rename getInvoiceTotal to computeInvoiceTotal everywhere.
Assistant: Let me find every occurrence first.
*Searches and finds 14 occurrences in 6 files*
Assistant: There are 14 uses in 6 files; I'll track each file.
*Creates one todo per file and works through them, marking each completed*
<reasoning>
1. The search showed the change spans many files.
2. A list per file makes sure none is forgotten.
</reasoning>
</example>

<example>
User: I need a settings page, a password reset flow, CSV export and an audit log.
Assistant: *Creates four todos, one per feature, each broken into smaller steps when started*
<reasoning>
1. The user listed several features in one message.
2. A todo list turns a large request into reviewable pieces.
</reasoning>
</example>

<example>
User: The CSV import crashes on files with a BOM, and while you're there please make the \
error message say which line failed.
Assistant: *Creates todos: 1. Reproduce the crash with a BOM-prefixed file 2. Strip the BOM \
when opening the file 3. Include the line number in parse errors 4. Add tests for both \
changes 5. Run the import tests*
<reasoning>
1. Two separate requests arrived in one message; each needs its own steps.
2. Reproducing first makes sure the fix addresses the real cause.
</reasoning>
</example>

<example>
User: Can you make the test suite faster? It takes twelve minutes.
Assistant: Let me measure first.
*Runs the suite with --durations=25 and finds that database fixtures dominate*
Assistant: *Creates todos: 1. Share the database fixture per session instead of per test \
2. Replace sleep-based waits in the queue tests with events 3. Run tests in parallel with \
xdist 4. Measure the suite again and compare*
<reasoning>
1. Optimization needs measurement before and after; both are explicit steps.
2. Each bottleneck found becomes a separate, checkable item.
</reasoning>
</example>

<example>
User: How do I print the current working directory in Python?
Assistant: Use os.getcwd(), or Path.cwd() from pathlib.
<reasoning>
One informational answer; there is nothing to track.
</reasoning>
</example>

<example>
User: Upgrade the project to Django 5 and fix whatever breaks.
Assistant: *Reads the release notes for removed features, searches the codebase for each \
one, and creates todos: 1. Bump the dependency 2. Replace the removed setting \
USE_L10N 3. Update the three uses of the removed assertFormError signature 4. Run \
migrations check 5. Run the full test suite 6. Fix remaining failures one by one*
<reasoning>
An upgrade has an open-ended tail of follow-up fixes. Tracking them keeps the user informed \
and makes it clear what is left when the work has to pause.
</reasoning>
</example>

## Examples of when NOT to use the todo list

<example>
User: What does the --strict flag of our import command do?
Assistant: *Reads the argument parser and the function that checks the flag, then answers*
<reasoning>
The user wants an explanation. Reading two places in the code is not a multi-step task that \
needs tracking, even though it takes a few tool calls.
</reasoning>
</example>

<example>
User: Add a docstring to parse_amount.
Assistant: *Uses Edit to add the docstring*
<reasoning>
A single small edit in one place.
</reasoning>
</example>

<example>
User: Run the linter.
Assistant: *Runs the linter with Bash and reports the result*
<reasoning>
One command with an immediate answer.
</reasoning>
</example>

## Task states and management

1. States:
   - pending: not started yet
   - in_progress: being worked on now (only one at a time)
   - completed: finished successfully

   Every task needs two forms:
   - content: the imperative form, e.g. "Run the test suite"
   - activeForm: the continuous form shown while it runs, e.g. "Running the test suite"

2. Management:
   - Update states in real time as you work.
   - Mark a task completed IMMEDIATELY when it is done; do not batch completions.
   - Exactly one task should be in_progress while you are working.
   - Remove tasks that no longer matter instead of leaving them pending.

3. Completion:
   - Only mark a task completed when it is fully done.
   - If tests fail, the implementation is partial, or an error is unresolved, keep it \
in_progress and add a task for what blocks you.
   - Never mark a task completed when you could not verify it.

4. Breakdown:
   - Make tasks specific and actionable.
   - Split complex tasks into smaller steps with clear names.

5. Naming:
   - Start with a verb: "Add", "Fix", "Remove", "Run", "Document".
   - Name the thing changed: "Fix rounding of credit notes", not "Fix bug".
   - Keep each item to one line; put details into your messages, not the list.

Example of a list in the middle of a task:
- [completed] Reproduce the crash with a BOM-prefixed file
- [in_progress] Strip the BOM when opening the file (activeForm: "Stripping the BOM when \
opening the file")
- [pending] Include the line number in parse errors
- [pending] Add tests for both changes

When in doubt, use this tool. Careful task tracking shows that you are thorough and makes \
sure every requirement is met.
"""

READ_DESCRIPTION = """\
Reads a file from the local filesystem. You may read any file the user can read; assume a \
path the user gave you is valid. Reading a file that does not exist simply returns an error.

Usage:
- file_path must be absolute, not relative.
- By default up to 2000 lines are read from the start of the file.
- You can pass offset (line number to start at) and limit (number of lines) — especially \
useful for long files — but prefer reading the whole file when it is small.
- Lines longer than 2000 characters are cut.
- The result is numbered like `cat -n`: each line starts with its number and a → arrow. The \
number and arrow are not part of the file; never copy them into Edit strings.
- Images (PNG, JPG, GIF, WebP) are shown to you visually.
- PDF files are read page by page, text and images alike. Long PDFs may need several \
reads; pass a page range when the tool tells you the document is too large.
- Jupyter notebooks (.ipynb) are returned with all cells and their outputs.
- To list a directory, use LS or Bash — this tool reads files only.
- You can call several tools in one message; when several files may be relevant, read them \
all at once.
- Screenshots the user mentions by path should be read with this tool as well.
- An existing file that is empty produces a warning instead of content.
- Reading a file again after you edited it is rarely needed: Edit and Write show you the \
changed region. Read again only when other tools or commands may have changed the file.
- Binary files other than images and PDFs are not shown; use Bash with `file` or `xxd | \
head` to inspect them if you must.
- When the user refers to "the log" or "the error", look for the newest file in the usual \
places (logs/, .pytest_cache/, target/, the system temp folder) before asking.
- Large generated files (lock files, minified bundles, snapshots) waste context: read a \
slice with offset and limit, or search them with Grep.
"""

EDIT_DESCRIPTION = """\
Replaces an exact string in a file.

Usage:
- Read the file at least once in this conversation before editing it; the edit is refused \
otherwise.
- Copy old_string exactly from the Read output, with the indentation that follows the line \
number prefix (number, arrow). Never include any part of that prefix in old_string or \
new_string.
- Edit existing files rather than writing new ones whenever you can.
- Do not add emoji unless the user asks for them.
- The edit FAILS if old_string occurs more than once. Add surrounding lines until it is \
unique, or set replace_all to change every occurrence.
- replace_all is the right choice for renaming a variable or a string across one file.

A good old_string is short but unique: usually the line you change plus one or two lines of \
context. Include the whole line, never part of a line, so that indentation stays right.

<example>
old_string: "    return -abs(amount).quantize(CENT, rounding=ROUND_HALF_UP)"
new_string: "    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)"
</example>

Common mistakes:
- Copying the line-number prefix from Read output into old_string.
- Changing tabs to spaces (or back) by retyping a line; copy indentation exactly.
- Editing a generated file (a lock file, a compiled bundle, a migration snapshot) instead of \
its source; find the generator and run it.
- Making an edit that leaves the file temporarily broken and then forgetting the follow-up \
edit; prefer MultiEdit for changes that only make sense together.

For large rewrites — more than about half of a file — Write the whole file instead of \
chaining many edits; it is easier to review and cannot leave half-applied changes behind.

When an edit fails because old_string was not found, read the file again: it may have been \
changed by a formatter, by a command you ran, or by the user in the meantime.
"""

MULTI_EDIT_DESCRIPTION = """\
Applies several find-and-replace edits to one file in a single operation. Prefer it to \
several Edit calls when you change many places in the same file.

Before using it:
1. Read the file to see its current content.
2. Check the path.

Each edit has the same fields as Edit:
- old_string: the exact text to replace, whitespace included
- new_string: the text to put in its place
- replace_all: replace every occurrence (optional, false by default)

The edits are applied in order, each to the result of the one before, and either all of \
them succeed or none is applied. Plan them so that an earlier edit does not change text that \
a later edit looks for.

Important:
- All edits follow the rules of Edit: exact match, unique unless replace_all.
- The tool fails as a whole if any edit does not match.
- Keep the file valid after every step: code that does not parse halfway through makes later \
edits hard to check.
- To create a file, give a new path, an empty old_string for the first edit and the whole \
content as its new_string; further edits then apply to that content.
- Always use absolute paths.

Prefer MultiEdit when:
- several places in one file must change together to keep the code valid (a signature and \
its callers, an import and its use);
- you apply the same review comments to one file;
- you would otherwise need three or more Edit calls on the same file.

Example: to rename a function and update its two call sites in the same module, use one \
MultiEdit with three edits, or a single edit with replace_all when the name is unique enough \
that no other identifier contains it.
"""

WRITE_DESCRIPTION = """\
Writes a file to the local filesystem, replacing it if it exists.

Usage:
- If the file exists, you must have read it in this conversation first; the write is \
refused otherwise.
- Prefer editing existing files. Never create documentation files (*.md, README) unless the \
user asks for them.
- Use an absolute path.
- Do not add emoji unless the user asks for them.
- Write the complete content: the tool does not append, and anything you leave out is lost.
- Create a new file only when the task needs one: a new module the user asked for, a test \
file next to existing ones, a configuration file a tool requires. Scratch notes, plans and \
summaries belong in your messages, not in files.
- Match the project's line endings and final newline; look at a neighbouring file if unsure.
"""

GLOB_DESCRIPTION = """\
Finds files by name pattern, fast on codebases of any size.
- Supports patterns such as "**/*.py" or "src/**/*.{ts,tsx}".
- Returns matching paths, most recently modified first.
- Use it whenever you know part of a file's name.
- For open-ended searches that may take several rounds of globbing and grepping, use the \
Task tool instead.
- Several searches that might all be useful can be sent at once in one message.
- Patterns are matched against paths relative to the search folder; files ignored by \
.gitignore are skipped.
- A pattern without a slash only matches in the search folder itself; prefix it with \
"**/" to search all subfolders.
- Examples: "**/test_*.py" finds Python test modules, "**/Dockerfile*" finds container \
builds, "src/**/index.{js,ts}" finds entry points.
"""

GREP_DESCRIPTION = """\
Searches file contents with ripgrep.

Usage:
- ALWAYS use this tool to search; never run grep or rg through Bash. It has the right \
permissions and trims its output for you.
- Supports full regular-expression syntax ("log.*Error", "def\\s+\\w+").
- Filter files with glob ("*.js", "**/*.tsx") or type ("py", "rust", "go").
- output_mode: "content" shows matching lines, "files_with_matches" only paths (default), \
"count" match counts per file.
- For open-ended searches that may take several rounds, use the Task tool.
- The syntax is ripgrep's, not grep's: literal braces must be escaped, so search for \
`interface\\{\\}` to find `interface{}` in Go code.
- A pattern matches within single lines. Set multiline to true for patterns that span lines \
such as `struct \\{[\\s\\S]*?field`.

Examples:
- Where is a setting read?  pattern "TIMEOUT_SECONDS", output_mode "content", -n true
- Which test files use a fixture?  pattern "def test_.*\\bledger_db\\b", glob "tests/**/*.py"
- How often is a deprecated call used?  pattern "datetime\\.utcnow\\(", output_mode "count"

Tips:
- Search vendored or ignored files explicitly by giving their path; ignored files are \
skipped otherwise.
- Start with files_with_matches to see how widespread something is, then switch to content \
for the few files that matter; this keeps the output small.

Regex tips:
- Escape regex metacharacters in literal searches: "\\.quantize\\(" not ".quantize(".
- Use \\b for word boundaries so that "round" does not match "around" or "rounding".
- Alternatives with (a|b) let one search replace several; keep them few so results stay \
readable.
- Case-insensitive search (-i) helps for prose and log messages, rarely for identifiers.
"""

LS_DESCRIPTION = """\
Lists the files and folders in a directory. path must be absolute. ignore takes glob \
patterns to leave out. When you know which files you are looking for, Glob and Grep are \
usually the better choice. Hidden files are listed; folders ignored by .gitignore are \
listed but not entered.
"""

WEB_FETCH_DESCRIPTION = """\
Fetches a URL and answers a prompt about its content.
- Takes a URL and a prompt.
- Fetches the page and converts HTML to markdown.
- Runs the prompt over the content with a small, fast model.
- Returns that model's answer.
- Use it when you need to read web content.

Usage notes:
  - If an MCP-provided web fetch tool is available, prefer it: it may have fewer \
restrictions. Its name starts with "mcp__".
  - The URL must be fully formed and valid.
  - HTTP URLs are upgraded to HTTPS.
  - The prompt should say what to extract from the page.
  - The tool only reads; it never changes anything.
  - Very large pages may be summarized.
  - A 15-minute cache makes repeated fetches of the same URL fast.
  - When a URL redirects to another host, the tool says so and gives the new URL; fetch that \
one with a new call.
  - Results are plain text converted from HTML; tables survive as markdown tables, but \
scripts, styles and navigation menus are removed.
  - Pages behind a login cannot be read; tell the user instead of guessing their content.
  - Ask focused questions in the prompt ("Which options does the retry decorator accept, \
and what are their defaults?") rather than "summarize this page"; the answer is more precise \
and shorter.
  - For GitHub URLs, prefer the gh command through Bash: it sees private repositories the \
user has access to and returns structured data.
"""

WEB_SEARCH_DESCRIPTION = """\
Searches the web and returns result blocks with titles, links and short extracts, so you can \
answer with information newer than your training data.

Usage notes:
  - Restrict results with allowed_domains or exclude sites with blocked_domains.
  - Cite the pages you relied on with markdown links after your answer.
  - Use the current year from the environment information when you search for recent \
releases or documentation; do not assume last year's.
  - Search results can be outdated or wrong. For anything that decides what you do next, \
open the most relevant result with WebFetch and read it.
  - Web search is only available in some regions; if it fails, say so and answer from what \
you know, marking what may be out of date.
  - Prefer primary sources — official documentation, release notes, the project's own \
repository — over blog posts and forums.
  - Good queries are specific: "pydantic 2.11 model_validator mode after changelog" finds \
the answer; "pydantic validators" finds tutorials.
  - Use allowed_domains to stay within official documentation when the user asks how a \
library is meant to be used.
"""

NOTEBOOK_EDIT_DESCRIPTION = """\
Replaces, inserts or deletes one cell of a Jupyter notebook (.ipynb). notebook_path must be \
absolute. cell_id names the cell to change; with edit_mode=insert the new cell goes after it, \
or at the start when cell_id is omitted. edit_mode=delete removes the cell. cell_type is \
required when inserting. Cell ids are shown when you Read the notebook. Outputs of a \
replaced code cell are cleared; run the notebook again if the user needs fresh outputs. \
Keep cells small and in execution order; a notebook that only works when cells run out of \
order is a bug.
"""

EXIT_PLAN_MODE_DESCRIPTION = """\
Call this when you are in plan mode and have finished planning the implementation steps of a \
coding task, to show the plan and ask the user to approve it.

Only use it for tasks that need code to be written. When the task is research — reading \
files, searching, understanding the codebase — do NOT use it.

Examples:
1. "Find out how the retry logic in the HTTP client works" — research only: do not use this \
tool.
2. "Add exponential backoff to the HTTP client" — implementation: present the plan with this \
tool once you know which files change.
3. "Why is the nightly export slow?" — investigate first; use this tool only if you then \
propose code changes.

The plan may be written in markdown and should be concise: the files that change, what \
changes in each, and how you will verify it. Do not start editing before the user approves; \
if they ask for changes, revise the plan and call this tool again.

<example>
## Plan: exponential backoff for the HTTP client
1. `src/ledger/http.py`: wrap `send()` in a retry loop — 5 attempts, delay 0.5 s × 2^n \
with ±20 % jitter, only for connection errors and 502/503/504.
2. `src/ledger/settings.py`: add `http_max_retries` (default 5) and validate it is ≥ 0.
3. `tests/test_http.py`: fake server that fails twice then succeeds; assert three attempts \
and the total delay bounds using a fake clock.
4. Run `uv run pytest tests/test_http.py` and the linter.
</example>
"""

BASH_OUTPUT_DESCRIPTION = """\
Reads the output of a shell started with run_in_background.
- Takes the shell_id returned when the command was started.
- Returns only output produced since the last read, with the shell's current status.
- Pass filter (a regular expression) to keep only matching lines; lines that do not match \
are discarded and cannot be read again.
- Use /bashes to list running shells.
- Poll sparingly: a server that is starting up needs a few seconds, and every read costs a \
round trip.
- The status is one of running, completed or killed; a completed shell also reports its \
exit code.
"""

KILL_SHELL_DESCRIPTION = """\
Stops a background shell by its id and returns whether it was running. Use it for servers \
and watchers you no longer need. Use /bashes to list the shells. Killing a shell also \
stops the processes it started; their output up to that point can still be read once.
"""

SLASH_COMMAND_DESCRIPTION = """\
Runs one of the user's custom slash commands inside the conversation.

Usage:
- command: the slash command with its arguments, e.g. "/review-pr 412".

Rules:
- Only commands listed under "Available commands" below can be run.
- Do not run a command that is already running (its expansion is in the conversation).
- Built-in commands such as /help or /clear are not available through this tool.
- A command's expansion may ask you to do several things; follow it like a user message, \
with TodoWrite if it has several steps.
- Arguments are passed as written; quote them the way the command's description shows.
- When the user's request matches a command's description, prefer the command.

Available commands:
- /review-pr <number>: Review a pull request against the team checklist (project)
- /changelog: Draft a changelog entry from the commits since the last tag (project)
- /explain-failure <job-url>: Fetch a failed CI job's log and explain the first error (user)
- /deps-audit: List outdated and vulnerable dependencies with upgrade notes (user)
- /release-notes <version>: Turn merged pull request titles into user-facing release notes \
(project)
- /triage <issue>: Label an issue, find duplicates and suggest an owner (project)
- /bench-compare <ref>: Run the benchmarks on the current branch and on ref and print the \
ratios (user)
"""


def claude_code_tools() -> list[dict[str, JSON]]:
    return [
        anthropic_tool(
            "Task",
            TASK_DESCRIPTION,
            zod_object(
                {
                    "description": string("A short (3-5 word) description of the task"),
                    "prompt": string("The task for the agent to perform"),
                    "subagent_type": string("The type of specialized agent to use"),
                },
                ["description", "prompt", "subagent_type"],
            ),
        ),
        anthropic_tool(
            "Bash",
            BASH_DESCRIPTION,
            zod_object(
                {
                    "command": string("The command to execute"),
                    "timeout": number("Optional timeout in milliseconds (max 600000)"),
                    "description": string(
                        "A clear, concise description of what this command does in 5-10 words, "
                        "in active voice, e.g. 'Run unit tests for the rounding module' or "
                        "'Show uncommitted changes'"
                    ),
                    "run_in_background": boolean(
                        "Set to true to run this command in the background. Use BashOutput to "
                        "read the output later."
                    ),
                    "dangerouslyDisableSandbox": boolean(
                        "Set this to true to run the command without the sandbox. The user is "
                        "asked to approve it; explain the reason in description."
                    ),
                },
                ["command"],
            ),
        ),
        anthropic_tool(
            "Glob",
            GLOB_DESCRIPTION,
            zod_object(
                {
                    "pattern": string("The glob pattern to match files against"),
                    "path": string(
                        "The directory to search in. Omit it to use the current working "
                        'directory; do not pass the string "undefined" or "null". Must be '
                        "a valid directory path if given."
                    ),
                },
                ["pattern"],
            ),
        ),
        anthropic_tool(
            "Grep",
            GREP_DESCRIPTION,
            zod_object(
                {
                    "pattern": string(
                        "The regular expression pattern to search for in file contents"
                    ),
                    "path": string(
                        "File or directory to search in (rg PATH). Defaults to the current "
                        "working directory."
                    ),
                    "glob": string(
                        'Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}") - maps to '
                        "rg --glob"
                    ),
                    "output_mode": {
                        "type": "string",
                        "enum": ["content", "files_with_matches", "count"],
                        "description": (
                            'Output mode: "content" shows matching lines (supports -A/-B/-C '
                            'context, -n line numbers, head_limit), "files_with_matches" shows '
                            'file paths (supports head_limit), "count" shows match counts '
                            '(supports head_limit). Defaults to "files_with_matches".'
                        ),
                    },
                    "-B": number(
                        "Number of lines to show before each match (rg -B). Requires "
                        'output_mode: "content", ignored otherwise.'
                    ),
                    "-A": number(
                        "Number of lines to show after each match (rg -A). Requires "
                        'output_mode: "content", ignored otherwise.'
                    ),
                    "-C": number(
                        "Number of lines to show before and after each match (rg -C). "
                        'Requires output_mode: "content", ignored otherwise.'
                    ),
                    "-n": boolean(
                        'Show line numbers in output (rg -n). Requires output_mode: "content", '
                        "ignored otherwise."
                    ),
                    "-i": boolean("Case insensitive search (rg -i)"),
                    "type": string(
                        "File type to search (rg --type). Common types: js, py, rust, go, java. "
                        "More efficient than glob for standard file types."
                    ),
                    "head_limit": number(
                        'Limit output to the first N lines/entries, like "| head -N". Works '
                        "across all output modes. Defaults to no limit."
                    ),
                    "multiline": boolean(
                        "Enable multiline mode where . matches newlines and patterns can span "
                        "lines (rg -U --multiline-dotall). Default: false."
                    ),
                },
                ["pattern"],
            ),
        ),
        anthropic_tool(
            "LS",
            LS_DESCRIPTION,
            zod_object(
                {
                    "path": string("The absolute path to the directory to list (must be absolute)"),
                    "ignore": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "List of glob patterns to ignore",
                    },
                },
                ["path"],
            ),
        ),
        anthropic_tool(
            "ExitPlanMode",
            EXIT_PLAN_MODE_DESCRIPTION,
            zod_object(
                {
                    "plan": string(
                        "The plan you came up with, that you want to run by the user for "
                        "approval. Supports markdown. The plan should be pretty concise."
                    )
                },
                ["plan"],
            ),
        ),
        anthropic_tool(
            "Read",
            READ_DESCRIPTION,
            zod_object(
                {
                    "file_path": string("The absolute path to the file to read"),
                    "offset": number(
                        "The line number to start reading from. Only provide if the file is "
                        "too large to read at once"
                    ),
                    "limit": number(
                        "The number of lines to read. Only provide if the file is too large "
                        "to read at once."
                    ),
                },
                ["file_path"],
            ),
        ),
        anthropic_tool(
            "Edit",
            EDIT_DESCRIPTION,
            zod_object(
                {
                    "file_path": string("The absolute path to the file to modify"),
                    "old_string": string("The text to replace"),
                    "new_string": string(
                        "The text to replace it with (must be different from old_string)"
                    ),
                    "replace_all": boolean(
                        "Replace all occurrences of old_string (default false)", default=False
                    ),
                },
                ["file_path", "old_string", "new_string"],
            ),
        ),
        anthropic_tool(
            "MultiEdit",
            MULTI_EDIT_DESCRIPTION,
            zod_object(
                {
                    "file_path": string("The absolute path to the file to modify"),
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "old_string": string("The text to replace"),
                                "new_string": string("The text to replace it with"),
                                "replace_all": boolean(
                                    "Replace all occurrences of old_string (default false).",
                                    default=False,
                                ),
                            },
                            "required": ["old_string", "new_string"],
                            "additionalProperties": False,
                        },
                        "minItems": 1,
                        "description": (
                            "Array of edit operations to perform sequentially on the file"
                        ),
                    },
                },
                ["file_path", "edits"],
            ),
        ),
        anthropic_tool(
            "Write",
            WRITE_DESCRIPTION,
            zod_object(
                {
                    "file_path": string(
                        "The absolute path to the file to write (must be absolute, not relative)"
                    ),
                    "content": string("The content to write to the file"),
                },
                ["file_path", "content"],
            ),
        ),
        anthropic_tool(
            "NotebookEdit",
            NOTEBOOK_EDIT_DESCRIPTION,
            zod_object(
                {
                    "notebook_path": string(
                        "The absolute path to the Jupyter notebook file to edit (must be absolute)"
                    ),
                    "cell_id": string(
                        "The ID of the cell to edit. When inserting a new cell, the new cell "
                        "will be inserted after the cell with this ID, or at the beginning if "
                        "not specified."
                    ),
                    "new_source": string("The new source for the cell"),
                    "cell_type": {
                        "type": "string",
                        "enum": ["code", "markdown"],
                        "description": (
                            "The type of the cell (code or markdown). If not specified, it "
                            "defaults to the current cell type. Required for edit_mode=insert."
                        ),
                    },
                    "edit_mode": {
                        "type": "string",
                        "enum": ["replace", "insert", "delete"],
                        "description": (
                            "The type of edit to make (replace, insert, delete). Defaults to "
                            "replace."
                        ),
                    },
                },
                ["notebook_path", "new_source"],
            ),
        ),
        anthropic_tool(
            "WebFetch",
            WEB_FETCH_DESCRIPTION,
            zod_object(
                {
                    "url": string("The URL to fetch content from", format="uri"),
                    "prompt": string("The prompt to run on the fetched content"),
                },
                ["url", "prompt"],
            ),
        ),
        anthropic_tool(
            "TodoWrite",
            TODO_DESCRIPTION,
            zod_object(
                {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1},
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "completed"],
                                },
                                "activeForm": {"type": "string", "minLength": 1},
                            },
                            "required": ["content", "status", "activeForm"],
                            "additionalProperties": False,
                        },
                        "description": "The updated todo list",
                    }
                },
                ["todos"],
            ),
        ),
        anthropic_tool(
            "WebSearch",
            WEB_SEARCH_DESCRIPTION,
            zod_object(
                {
                    "query": string("The search query to use", minLength=2),
                    "allowed_domains": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Only include search results from these domains",
                    },
                    "blocked_domains": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Never include search results from these domains",
                    },
                },
                ["query"],
            ),
        ),
        anthropic_tool(
            "BashOutput",
            BASH_OUTPUT_DESCRIPTION,
            zod_object(
                {
                    "bash_id": string("The ID of the background shell to retrieve output from"),
                    "filter": string(
                        "Optional regular expression to filter the output lines. Only lines "
                        "matching this regex will be included in the result. Any lines that do "
                        "not match will no longer be available to read."
                    ),
                },
                ["bash_id"],
            ),
        ),
        anthropic_tool(
            "KillShell",
            KILL_SHELL_DESCRIPTION,
            zod_object(
                {"shell_id": string("The ID of the background shell to kill")}, ["shell_id"]
            ),
        ),
        anthropic_tool(
            "SlashCommand",
            SLASH_COMMAND_DESCRIPTION,
            zod_object(
                {
                    "command": string(
                        'The slash command to execute with its arguments, e.g., "/review-pr 123"'
                    )
                },
                ["command"],
            ),
        ),
        *claude_code_mcp_tools(),
    ]


def gh_repo_fields() -> dict[str, JSON]:
    return {
        "owner": string("Repository owner (user or organization)"),
        "repo": string("Repository name"),
    }


def claude_code_mcp_tools() -> list[dict[str, JSON]]:
    """MCP tools as Claude Code forwards them: the server's inputSchema becomes input_schema.

    Several carry annotation keywords a zod or TypeScript server adds (`title`, `examples`,
    `deprecated`), and properties named `title`/`description` that must survive compaction.
    """
    return [
        anthropic_tool(
            "mcp__github__create_pull_request",
            "Create a new pull request in a GitHub repository. The head branch must already be "
            "pushed. Returns the pull request number, URL and mergeability state. Use draft for "
            "work that is not ready for review; reviewers are not requested automatically.\n\n"
            "The title should be a short imperative summary of the whole change. The body "
            "should explain why the change is needed, what it does, and how it was tested; "
            "reference issues it closes with 'Closes #NUMBER' so they close on merge. When the "
            "head branch lives in a fork, prefix it with the fork owner, e.g. 'ana:fix-rounding'.",
            zod_object(
                {
                    **gh_repo_fields(),
                    "title": string(
                        "Pull request title", examples=["Fix rounding of credit notes"]
                    ),
                    "body": string("Pull request body in GitHub-flavoured markdown"),
                    "head": string(
                        "The branch that contains your changes; prefix with 'user:' for a fork"
                    ),
                    "base": string("The branch you want the changes pulled into"),
                    "draft": boolean("Open the pull request as a draft"),
                    "maintainer_can_modify": boolean(
                        "Allow maintainers of the base repository to push to the head branch"
                    ),
                },
                ["owner", "repo", "title", "head", "base"],
            ),
        ),
        anthropic_tool(
            "mcp__github__create_issue",
            "Create a new issue in a GitHub repository. Labels that do not exist are rejected "
            "rather than created, so list the repository's labels first when unsure. Assignees "
            "must have push access. Returns the issue number and URL.\n\nWrite the body in "
            "GitHub-flavoured markdown: a short description of the problem, steps to reproduce, "
            "what was expected and what happened, and any relevant log lines in a fenced code "
            "block. Link related issues with #NUMBER so GitHub cross-references them.\n\nBefore "
            "creating an issue, search for an existing one with the same symptom; a comment on "
            "an open issue is usually more useful than a duplicate.",
            zod_object(
                {
                    **gh_repo_fields(),
                    "title": string("Issue title"),
                    "body": string("Issue body content"),
                    "assignees": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Usernames to assign to this issue",
                    },
                    "labels": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Labels to apply to this issue",
                    },
                    "milestone": number("Milestone number"),
                    "type": string("Issue type, if the organization defines issue types"),
                },
                ["owner", "repo", "title"],
            ),
        ),
        anthropic_tool(
            "mcp__github__get_issue",
            "Get the details of one issue: title, body, state, labels, assignees, milestone and "
            "the number of comments. Pull requests are issues too; their number works here.\n\n"
            "Comments themselves are not included; list them separately when the discussion "
            "matters. Closed issues report who closed them and when, and whether they were "
            "closed as completed or as not planned.",
            zod_object(
                {
                    **gh_repo_fields(),
                    "issue_number": number("The number of the issue", title="Issue number"),
                },
                ["owner", "repo", "issue_number"],
            ),
        ),
        anthropic_tool(
            "mcp__github__list_pull_requests",
            "List pull requests of a repository, newest first by default. Filter by state, head "
            "or base branch. Results are paginated; use page and per_page to walk them.\n\n"
            "Each entry has the number, title, author, head and base branches, draft flag, "
            "labels and the time of the last update, but not the diff or the review comments; "
            "fetch those with the dedicated tools when you need them. To find the pull request for "
            "a local branch, filter by head with 'OWNER:BRANCH'.",
            zod_object(
                {
                    **gh_repo_fields(),
                    "state": {
                        "type": "string",
                        "enum": ["open", "closed", "all"],
                        "description": "Filter by state",
                        "default": "open",
                    },
                    "head": string("Filter by head user or organization and branch name"),
                    "base": string("Filter by base branch name"),
                    "sort": {
                        "type": "string",
                        "enum": ["created", "updated", "popularity", "long-running"],
                        "description": "What to sort results by",
                    },
                    "direction": {
                        "type": "string",
                        "enum": ["asc", "desc"],
                        "description": "The direction of the sort",
                    },
                    "per_page": number("Results per page (max 100)", minimum=1, maximum=100),
                    "page": number("Page number of the results to fetch", minimum=1),
                },
                ["owner", "repo"],
            ),
        ),
        anthropic_tool(
            "mcp__github__add_issue_comment",
            "Add a comment to an issue or pull request. The body is GitHub-flavoured markdown. "
            "To comment on a specific line of a pull request diff, use a review comment "
            "instead.\n\n"
            "Comments are public and notify everyone subscribed to the issue. Keep them "
            "factual: what you found, what you changed, and what is still open. Do not post "
            "comments the user has not asked for.",
            zod_object(
                {
                    **gh_repo_fields(),
                    "issue_number": number("Issue or pull request number to comment on"),
                    "body": string("Comment text"),
                },
                ["owner", "repo", "issue_number", "body"],
            ),
        ),
        anthropic_tool(
            "mcp__github__search_code",
            "Search code across GitHub repositories with GitHub's code search syntax, e.g. "
            "'repo:acme/ledger language:python round_half_even'. Returns file paths, repository "
            "names and matching fragments. Rate limits are stricter than for other endpoints.\n\n"
            "Qualifiers: repo:OWNER/NAME, org:NAME, language:NAME, path:DIR, filename:NAME, "
            "extension:EXT. Quote exact phrases. Only the default branch is searched, and files "
            "larger than 384 KB are not indexed.",
            zod_object(
                {
                    "q": string(
                        "Search query using GitHub code search syntax",
                        examples=["org:acme filename:settings.yaml timeout"],
                    ),
                    "sort": string("Sort field ('indexed' only)", deprecated=True),
                    "order": {
                        "type": "string",
                        "enum": ["asc", "desc"],
                        "description": "Sort order",
                    },
                    "per_page": number("Results per page (max 100)", minimum=1, maximum=100),
                    "page": number("Page number", minimum=1),
                },
                ["q"],
            ),
        ),
        anthropic_tool(
            "mcp__postgres__query",
            "Run a read-only SQL query against the connected PostgreSQL database and return the "
            "rows as JSON. The query runs inside a READ ONLY transaction that is always rolled "
            "back, so INSERT, UPDATE, DELETE and DDL statements fail. Add a LIMIT to queries on "
            "large tables; results over 1000 rows are truncated.\n\nUse information_schema or "
            "pg_catalog to discover tables and columns before writing joins. Timestamps are "
            "returned as ISO 8601 strings in UTC and numeric values as strings, so no precision "
            "is lost.\n\nExamples:\n- SELECT column_name, data_type FROM information_schema."
            "columns WHERE table_name = 'invoices'\n- SELECT date_trunc('month', issued_at) AS "
            "month, sum(total) FROM invoices GROUP BY 1 ORDER BY 1 DESC LIMIT 12",
            zod_object(
                {"sql": string("The SQL query to run", examples=["SELECT count(*) FROM invoices"])},
                ["sql"],
            ),
        ),
        anthropic_tool(
            "mcp__sentry__get_issue_details",
            "Fetch an error-tracking issue with its latest event: exception type and message, "
            "the stack trace with source context, tags, the release it first appeared in and how "
            "many users it affects. Pass either the issue URL or the organization slug together "
            "with the issue id.\n\nUse it when the user mentions a production error, pastes an "
            "issue link, or asks why something fails for customers. The stack trace points at "
            "the release that was deployed, which may differ from the code in the working tree; "
            "compare the release with git before editing.",
            zod_object(
                {
                    "issue_url": string("Full URL of the issue", format="uri"),
                    "organization_slug": string("The organization's slug"),
                    "issue_id": string("The issue id, e.g. 'LEDGER-3F'"),
                    "include_breadcrumbs": boolean(
                        "Include the breadcrumbs recorded before the error", default=False
                    ),
                },
                [],
            ),
        ),
        anthropic_tool(
            "mcp__playwright__browser_navigate",
            "Navigate the controlled browser tab to a URL and wait for the load event. Returns "
            "an accessibility snapshot of the page with element references you can pass to "
            "other browser tools. Only http and https URLs are allowed; file:// URLs and "
            "browser-internal pages are refused. If the page redirects, the snapshot describes "
            "the final page and its URL is reported.",
            zod_object({"url": string("The URL to navigate to")}, ["url"]),
        ),
        anthropic_tool(
            "mcp__playwright__browser_snapshot",
            "Capture an accessibility snapshot of the current page: the tree of roles, names "
            "and states that assistive technology sees, with a ref for every element you can "
            "interact with. This is better than a screenshot for deciding what to click or "
            "type, because refs are exact and text is not guessed from pixels. Take a new "
            "snapshot after every navigation or action that changes the page; refs from an "
            "older snapshot may no longer exist.",
            zod_object({}, []),
        ),
        anthropic_tool(
            "mcp__playwright__browser_fill_form",
            "Fill several form fields in one call. Each field is identified by its ref from "
            "the latest snapshot and gets a value appropriate to its type: text for textboxes, "
            "'true' or 'false' for checkboxes, the option's label for comboboxes and radio "
            "groups, a number for sliders. Fields are filled in the order given; the form is "
            "not submitted — click the submit button afterwards.",
            zod_object(
                {
                    "fields": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": string("Human-readable field name"),
                                "type": {
                                    "type": "string",
                                    "enum": ["textbox", "checkbox", "radio", "combobox", "slider"],
                                    "description": "Type of the field",
                                },
                                "ref": string(
                                    "Exact target field reference from the page snapshot"
                                ),
                                "value": string(
                                    "Value to fill in the field. If the field is a checkbox, the "
                                    "value should be `true` or `false`. If the field is a "
                                    "combobox, the value should be the text of the option."
                                ),
                            },
                            "required": ["name", "type", "ref", "value"],
                            "additionalProperties": False,
                        },
                        "description": "Fields to fill in",
                    }
                },
                ["fields"],
            ),
        ),
        anthropic_tool(
            "mcp__playwright__browser_click",
            "Click an element on the current page. Identify it by the exact ref from the latest "
            "page snapshot; the human-readable element text is used to ask the user for "
            "permission to interact with the page. After the click, a new snapshot is returned; "
            "if the click started a navigation, the snapshot describes the new page. Clicks on "
            "elements hidden behind overlays fail with a message naming the element that "
            "intercepted the click — close the overlay first.",
            zod_object(
                {
                    "element": string(
                        "Human-readable element description used to obtain permission to "
                        "interact with the element"
                    ),
                    "ref": string("Exact target element reference from the page snapshot"),
                    "doubleClick": boolean("Whether to perform a double click"),
                    "button": {
                        "type": "string",
                        "enum": ["left", "right", "middle"],
                        "description": "Button to click, defaults to left",
                    },
                },
                ["element", "ref"],
            ),
        ),
    ]


CLAUDE_CODE_SYSTEM = [
    {
        "type": "text",
        "text": "You are a command-line coding agent that helps people with software work.",
        "cache_control": {"type": "ephemeral"},
    },
    {
        "type": "text",
        "text": """\
You are an interactive command-line tool that helps users with software engineering tasks. \
Use the instructions below and the tools available to you to assist the user.

Refuse to write or explain code that may be used maliciously, even if the user says it is \
for education. Never guess URLs unless you are sure they help with programming.

# Tone and style
Be concise, direct and to the point. Your output is shown in a terminal and rendered as \
monospace markdown. Answer in fewer than four lines unless the user asks for detail — not \
counting tool calls or generated code. Do not add preambles like "Here is what I will do" or \
summaries of what you just did unless asked.

# Proactiveness
Do what was asked, including obvious follow-up actions, but do not surprise the user with \
actions they did not request. If they ask how to approach something, answer first; do not \
jump straight to editing.

# Following conventions
Before changing a file, understand its conventions: mimic the style, use the libraries and \
utilities that are already there, and follow existing patterns. Never assume a library is \
available — check the manifest (pyproject.toml, package.json, Cargo.toml) or neighbouring \
imports first. Never commit secrets or log them.

# Doing tasks
1. Plan with TodoWrite when the task has several steps.
2. Search the codebase to understand it; run searches in parallel when they are independent.
3. Implement the change with the available tools.
4. Verify it with the project's tests; find the test command in the README or the build \
files rather than guessing.
5. Run the linter and type checker the project uses (for example `ruff check` and `mypy`) \
when you have finished, and fix what they report.

# Code references
When you point at code, use the pattern `file_path:line_number` so the user can jump there.

Here is useful information about the environment you are running in:
<env>
Working directory: /home/dev/ledger
Is directory a git repo: Yes
Platform: linux
OS Version: Linux 6.8.0-49-generic
Today's date: 2025-06-14
</env>
You are powered by a large language model. Assistant knowledge cutoff is January 2025.

gitStatus: This is the git status at the start of the conversation. It does not update \
during the conversation.
Current branch: fix/credit-note-rounding

Main branch (you will usually use this for PRs): main

Status:
M src/ledger/rounding.py
?? notes/rounding-cases.md

Recent commits:
9c41e07 Bump decimal context precision to 28 digits
5d02b3a Add credit notes to the monthly export
e17f6a9 Split totals into rounding.py and totals.py""",
        "cache_control": {"type": "ephemeral"},
    },
]

ROUNDING_SOURCE_LISTING = """\
     1→\"\"\"Money rounding rules for invoices and credit notes.\"\"\"
     2→
     3→from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
     4→
     5→CENT = Decimal("0.01")
     6→
     7→
     8→def round_line(amount: Decimal) -> Decimal:
     9→    \"\"\"Round one invoice line to the cent, half-even like the tax office.\"\"\"
    10→    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)
    11→
    12→
    13→def round_credit(amount: Decimal) -> Decimal:
    14→    \"\"\"Round one credit-note line to the cent.\"\"\"
    15→    # Credit notes are negative; round the magnitude so −0.125 → −0.13.
    16→    return -abs(amount).quantize(CENT, rounding=ROUND_HALF_UP)
    17→
    18→
    19→def round_total(lines: list[Decimal]) -> Decimal:
    20→    \"\"\"Sum already-rounded lines; the total itself is never re-rounded.\"\"\"
    21→    return sum(lines, Decimal("0.00"))
    22→"""

PYTEST_FAILURE = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.2.1, pluggy-1.5.0
rootdir: /home/dev/ledger
configfile: pyproject.toml
collected 6 items

tests/test_rounding.py ....F.                                            [100%]

=================================== FAILURES ===================================
_________________ test_credit_note_rounds_half_even[-0.125] ____________________

amount = Decimal('-0.125'), expected = Decimal('-0.12')

    @pytest.mark.parametrize(("amount", "expected"), CREDIT_CASES)
    def test_credit_note_rounds_half_even(amount, expected):
>       assert round_credit(amount) == expected
E       AssertionError: assert Decimal('-0.13') == Decimal('-0.12')
E        +  where Decimal('-0.13') = round_credit(Decimal('-0.125'))

tests/test_rounding.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_rounding.py::test_credit_note_rounds_half_even[-0.125] - ...
========================= 1 failed, 5 passed in 0.09s =========================="""


def claude_code_messages() -> list[dict[str, JSON]]:
    return [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<system-reminder>\nAs you answer the user's questions, you can use "
                    "the following context:\n# important-instruction-reminders\nDo what has "
                    "been asked; nothing more, nothing less.\n</system-reminder>",
                },
                {
                    "type": "text",
                    "text": "test_credit_note_rounds_half_even started failing after the "
                    "precision bump — the export for März is off by a cent on every credit "
                    "note. Can you find out why and fix it?",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "I'll look at how credit notes are rounded and run the failing test.",
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01GqVb7TzK3mNf8wXa2Lc9Hd",
                    "name": "Grep",
                    "input": {
                        "pattern": "def round_credit",
                        "path": "/home/dev/ledger/src",
                        "output_mode": "content",
                        "-n": True,
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "tool_use_id": "toolu_01GqVb7TzK3mNf8wXa2Lc9Hd",
                    "type": "tool_result",
                    "content": "/home/dev/ledger/src/ledger/rounding.py:13:def round_credit("
                    "amount: Decimal) -> Decimal:",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01Hx4RrP8sYd2QeVn6JtW1Ku",
                    "name": "Read",
                    "input": {"file_path": "/home/dev/ledger/src/ledger/rounding.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01Mc2Ef5Ua9Wk7Ly3PoXz8Rb",
                    "name": "Bash",
                    "input": {
                        "command": "python -m pytest /home/dev/ledger/tests/test_rounding.py -q",
                        "description": "Run the rounding tests",
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "tool_use_id": "toolu_01Hx4RrP8sYd2QeVn6JtW1Ku",
                    "type": "tool_result",
                    "content": ROUNDING_SOURCE_LISTING,
                },
                {
                    "tool_use_id": "toolu_01Mc2Ef5Ua9Wk7Ly3PoXz8Rb",
                    "type": "tool_result",
                    "content": PYTEST_FAILURE,
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "`round_credit` rounds the magnitude half-up (rounding.py:16), so "
                    "−0.125 becomes −0.13, while invoice lines use half-even. The test expects "
                    "the same half-even rule for credit notes. Rounding the signed amount "
                    "half-even directly fixes it and keeps the sign.",
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01Tn6Wd3Jv5Gh1Zq8SbKe4Ym",
                    "name": "Edit",
                    "input": {
                        "file_path": "/home/dev/ledger/src/ledger/rounding.py",
                        "old_string": "    # Credit notes are negative; round the magnitude so "
                        "−0.125 → −0.13.\n    return -abs(amount).quantize(CENT, "
                        "rounding=ROUND_HALF_UP)",
                        "new_string": "    # Same half-even rule as invoice lines; quantize "
                        "keeps the sign.\n    return amount.quantize(CENT, "
                        "rounding=ROUND_HALF_EVEN)",
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "tool_use_id": "toolu_01Tn6Wd3Jv5Gh1Zq8SbKe4Ym",
                    "type": "tool_result",
                    "content": "The file /home/dev/ledger/src/ledger/rounding.py has been updated. "
                    "Here's the result of running `cat -n` on a snippet of the edited file:\n"
                    "    13→def round_credit(amount: Decimal) -> Decimal:\n"
                    '    14→    """Round one credit-note line to the cent."""\n'
                    "    15→    # Same half-even rule as invoice lines; quantize keeps the sign.\n"
                    "    16→    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01Pb9Kc7Xr2Fm4Nw6Ht3Qs5V",
                    "name": "Bash",
                    "input": {
                        "command": "python -m pytest /home/dev/ledger/tests -q && ruff check "
                        "/home/dev/ledger/src",
                        "description": "Run all tests and the linter",
                    },
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "tool_use_id": "toolu_01Pb9Kc7Xr2Fm4Nw6Ht3Qs5V",
                    "type": "tool_result",
                    "content": "......................................                   "
                    "[100%]\n38 passed in 0.41s\nsrc/ledger/rounding.py:3:40: F401 "
                    "[*] `decimal.ROUND_HALF_UP` imported but unused\nFound 1 error.\n[*] 1 "
                    "fixable with the `--fix` option.",
                    "is_error": True,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]


def claude_code_request() -> dict[str, JSON]:
    return {
        "model": "claude-sonnet-4-20250514",
        "messages": claude_code_messages(),
        "temperature": 1,
        "system": CLAUDE_CODE_SYSTEM,
        "tools": claude_code_tools(),
        "metadata": {
            "user_id": "user_5f0c2a9e7b1d4c38a6e0f2b9d7c4e1a3b8f6d2c0e9a7b5c3d1f4e2a0b9c8d7e6"
            "_account__session_0b7e3c1a-6d2f-4e9b-8a5c-3f1d7e2b9c04"
        },
        "max_tokens": 32000,
        "stream": True,
    }


# MCP servers built with FastMCP / pydantic v2: titles everywhere, anyOf-null, $defs + $ref.


def pydantic_order(schema: JSON) -> JSON:
    """Sort keys the way pydantic v2 emits them: alphabetically, but properties in field order.

    Instance data (`default`, `enum`, `const`, `examples`) is left exactly as written.
    """
    if isinstance(schema, list):
        return [pydantic_order(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ordered: dict[str, JSON] = {}
    for key in sorted(schema):
        value = schema[key]
        if key == "properties":
            ordered[key] = {name: pydantic_order(sub) for name, sub in value.items()}
        elif key == "$defs":
            ordered[key] = {name: pydantic_order(value[name]) for name in sorted(value)}
        elif key in ("default", "enum", "const", "examples"):
            ordered[key] = value
        else:
            ordered[key] = pydantic_order(value)
    return ordered


def field(
    title: str, schema: dict[str, JSON], description: str | None = None, **extra: JSON
) -> JSON:
    """A required pydantic field: its type schema plus `title` (and `description` if given)."""
    out = {**schema, "title": title, **extra}
    if description is not None:
        out["description"] = description
    return out


def optional(
    title: str, schema: dict[str, JSON], description: str | None = None, **extra: JSON
) -> JSON:
    """An `X | None = None` pydantic field."""
    out: dict[str, JSON] = {"anyOf": [schema, {"type": "null"}], "default": None, "title": title}
    if description is not None:
        out["description"] = description
    out.update(extra)
    return out


def model(
    title: str,
    properties: dict[str, JSON],
    required: list[str],
    defs: dict[str, JSON] | None = None,
    description: str | None = None,
) -> JSON:
    """A pydantic model schema; `defs` become the root's `$defs`."""
    out: dict[str, JSON] = {"properties": properties, "title": title, "type": "object"}
    if required:
        out["required"] = required
    if description is not None:
        out["description"] = description
    if defs:
        out["$defs"] = defs
    return pydantic_order(out)


STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
DATETIME = {"format": "date-time", "type": "string"}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


ISSUE_DEFS = {
    "Priority": {
        "enum": ["low", "medium", "high", "urgent"],
        "title": "Priority",
        "type": "string",
    },
    "IssueState": {
        "enum": ["open", "in_progress", "closed"],
        "title": "IssueState",
        "type": "string",
    },
    "Label": model(
        "Label",
        {
            "name": field("Name", STR, "Label name, unique per project", examples=["bug"]),
            "color": optional(
                "Color",
                {"pattern": "^#[0-9a-fA-F]{6}$", "type": "string"},
                "Hex colour such as #d73a4a; a colour is picked when omitted",
            ),
        },
        ["name"],
    ),
}

MCP_SERVER_INSTRUCTIONS = (
    "Tools below come from three MCP servers: tracker (issues), calendar (events) and "
    "warehouse (read-only analytics SQL). Call a tool only when the user's request needs it."
)


def mcp_tool(name: str, description: str, input_schema: JSON) -> dict[str, JSON]:
    return {"name": name, "description": description, "input_schema": input_schema}


def mcp_fastmcp_tools() -> list[dict[str, JSON]]:
    issue_ref = {
        "project": field("Project", STR, "Project key, e.g. 'LEDGER'", examples=["LEDGER", "OPS"]),
        "number": field("Number", {"exclusiveMinimum": 0, "type": "integer"}, "Issue number"),
    }
    return [
        mcp_tool(
            "tracker_create_issue",
            "Create an issue in the tracker and return its key and URL.\n\nArgs:\n    project: "
            "Project key.\n    title: One-line summary.\n    body: Markdown description.\n    "
            "priority: How urgent the issue is.\n    labels: Labels to attach; unknown labels "
            "are created.\n    assignee: Username to assign, or None to leave it unassigned.",
            model(
                "Create Issue Arguments",
                {
                    "project": issue_ref["project"],
                    "title": field(
                        "Title", {"maxLength": 200, "type": "string"}, "One-line summary"
                    ),
                    "body": field("Body", STR, "Markdown description", default=""),
                    "priority": {**ref("Priority"), "default": "medium"},
                    "labels": field("Labels", {"items": ref("Label"), "type": "array"}, default=[]),
                    "assignee": optional("Assignee", STR, examples=["mhoffmann"]),
                    "due": optional("Due", {"format": "date", "type": "string"}, "Due date"),
                },
                ["project", "title"],
                defs={k: ISSUE_DEFS[k] for k in ("Label", "Priority")},
            ),
        ),
        mcp_tool(
            "tracker_get_issue",
            "Fetch one issue with its description, state, labels, assignee and the last 20 "
            "comments.",
            model("get_issueArguments", dict(issue_ref), ["project", "number"]),
        ),
        mcp_tool(
            "tracker_update_issue",
            "Change fields of an existing issue. Only the fields you pass are changed; pass "
            "null to leave a field as it is.",
            model(
                "Update Issue Arguments",
                {
                    **issue_ref,
                    "title": optional("Title", {"maxLength": 200, "type": "string"}),
                    "body": optional("Body", STR),
                    "state": {"anyOf": [ref("IssueState"), {"type": "null"}], "default": None},
                    "priority": {"anyOf": [ref("Priority"), {"type": "null"}], "default": None},
                    "assignee": optional(
                        "Assignee", STR, "Username, or an empty string to unassign"
                    ),
                },
                ["project", "number"],
                defs={k: ISSUE_DEFS[k] for k in ("IssueState", "Priority")},
            ),
        ),
        mcp_tool(
            "tracker_list_issues",
            "List issues of a project, newest first. Filters combine with AND.",
            model(
                "list_issuesArguments",
                {
                    "project": issue_ref["project"],
                    "state": {"anyOf": [ref("IssueState"), {"type": "null"}], "default": None},
                    "label": optional("Label", STR, "Only issues carrying this label"),
                    "assignee": optional("Assignee", STR),
                    "limit": field(
                        "Limit", {"maximum": 100, "minimum": 1, "type": "integer"}, default=20
                    ),
                    "cursor": optional("Cursor", STR, "Opaque cursor from a previous page"),
                },
                ["project"],
                defs={"IssueState": ISSUE_DEFS["IssueState"]},
            ),
        ),
        mcp_tool(
            "tracker_search_issues",
            "Full-text search over issue titles, bodies and comments across all projects you "
            "can see. Supports quoted phrases and -term exclusion.",
            model(
                "search_issuesArguments",
                {
                    "query": field(
                        "Query", STR, "Search text", examples=['"credit note" -export', "rounding"]
                    ),
                    "projects": optional(
                        "Projects", {"items": STR, "type": "array"}, "Restrict to these projects"
                    ),
                    "limit": field(
                        "Limit", {"maximum": 50, "minimum": 1, "type": "integer"}, default=10
                    ),
                },
                ["query"],
            ),
        ),
        mcp_tool(
            "tracker_add_comment",
            "Add a markdown comment to an issue. Mention people with @username.",
            model(
                "add_commentArguments",
                {**issue_ref, "body": field("Body", {"minLength": 1, "type": "string"})},
                ["project", "number", "body"],
            ),
        ),
        mcp_tool(
            "tracker_link_issues",
            "Create a typed link between two issues, e.g. 'blocks' or 'duplicates'.",
            model(
                "Link Issues Arguments",
                {
                    "source": field("Source", ref("IssueKey")),
                    "target": field("Target", ref("IssueKey")),
                    "kind": field(
                        "Kind",
                        {"enum": ["blocks", "duplicates", "relates_to"], "type": "string"},
                        default="relates_to",
                    ),
                },
                ["source", "target"],
                defs={
                    "IssueKey": model(
                        "IssueKey", dict(issue_ref), ["project", "number"], description="Issue key"
                    )
                },
            ),
        ),
        mcp_tool(
            "calendar_list_events",
            "List events between two instants in the user's calendars. Times are ISO 8601 with "
            "an offset; all-day events have no time part.",
            model(
                "list_eventsArguments",
                {
                    "start": field("Start", DATETIME, examples=["2025-06-16T00:00:00+02:00"]),
                    "end": field("End", DATETIME),
                    "calendar_id": optional("Calendar Id", STR, "Defaults to the primary calendar"),
                    "include_declined": field("Include Declined", BOOL, default=False),
                },
                ["start", "end"],
            ),
        ),
        mcp_tool(
            "calendar_create_event",
            "Create a calendar event and invite attendees. Returns the event id and a link.",
            model(
                "Create Event Arguments",
                {
                    "summary": field("Summary", STR, "Event title shown in calendars"),
                    "start": field("Start", DATETIME),
                    "end": field("End", DATETIME),
                    "attendees": field(
                        "Attendees", {"items": ref("Attendee"), "type": "array"}, default=[]
                    ),
                    "location": optional("Location", STR),
                    "recurrence": {"anyOf": [ref("Recurrence"), {"type": "null"}], "default": None},
                    "reminder_minutes": optional(
                        "Reminder Minutes", {"maximum": 10080, "minimum": 0, "type": "integer"}
                    ),
                },
                ["summary", "start", "end"],
                defs={
                    "Attendee": model(
                        "Attendee",
                        {
                            "email": field("Email", {"format": "email", "type": "string"}),
                            "optional": field("Optional", BOOL, default=False),
                        },
                        ["email"],
                    ),
                    "Frequency": {
                        "enum": ["daily", "weekly", "monthly", "yearly"],
                        "title": "Frequency",
                        "type": "string",
                    },
                    "Recurrence": model(
                        "Recurrence",
                        {
                            "frequency": ref("Frequency"),
                            "interval": field(
                                "Interval", {"minimum": 1, "type": "integer"}, default=1
                            ),
                            "until": optional("Until", {"format": "date", "type": "string"}),
                            "count": optional("Count", {"minimum": 1, "type": "integer"}),
                        },
                        ["frequency"],
                    ),
                },
            ),
        ),
        mcp_tool(
            "calendar_find_free_slots",
            "Find time slots in which all given people are free, within working hours.",
            model(
                "find_free_slotsArguments",
                {
                    "emails": field("Emails", {"items": STR, "minItems": 1, "type": "array"}),
                    "duration_minutes": field(
                        "Duration Minutes", {"maximum": 480, "minimum": 5, "type": "integer"}
                    ),
                    "window_start": field("Window Start", DATETIME),
                    "window_end": field("Window End", DATETIME),
                    "timezone": field("Timezone", STR, default="UTC", examples=["Europe/Berlin"]),
                },
                ["emails", "duration_minutes", "window_start", "window_end"],
            ),
        ),
        mcp_tool(
            "calendar_cancel_event",
            "Cancel an event you organize and notify its attendees.",
            model(
                "cancel_eventArguments",
                {
                    "event_id": field("Event Id", STR),
                    "message": optional("Message", STR, "Note sent to attendees"),
                },
                ["event_id"],
            ),
        ),
        mcp_tool(
            "warehouse_list_tables",
            "List tables in the analytics warehouse with their row counts and descriptions.",
            model(
                "list_tablesArguments",
                {"schema_name": field("Schema Name", STR, default="public")},
                [],
            ),
        ),
        mcp_tool(
            "warehouse_describe_table",
            "Show the columns of a table: name, type, nullability and comment.",
            model(
                "describe_tableArguments",
                {
                    "table": field("Table", STR, examples=["invoices", "finance.credit_notes"]),
                },
                ["table"],
            ),
        ),
        mcp_tool(
            "warehouse_run_query",
            "Run a read-only SQL query and return at most max_rows rows as JSON records. "
            "Queries time out after 30 seconds.",
            model(
                "run_queryArguments",
                {
                    "sql": field("Sql", STR, "A single SELECT or WITH statement"),
                    "params": optional(
                        "Params",
                        {
                            "additionalProperties": {
                                "anyOf": [STR, {"type": "number"}, BOOL, {"type": "null"}]
                            },
                            "type": "object",
                        },
                        "Named parameters referenced as %(name)s",
                    ),
                    "max_rows": field(
                        "Max Rows", {"maximum": 5000, "minimum": 1, "type": "integer"}, default=200
                    ),
                },
                ["sql"],
            ),
        ),
        mcp_tool(
            "warehouse_explain_query",
            "Return the query plan for a SELECT without running it.",
            model(
                "explain_queryArguments",
                {
                    "sql": field("Sql", STR),
                    "analyze": field(
                        "Analyze",
                        BOOL,
                        "Deprecated: plans are never executed any more",
                        default=False,
                        deprecated=True,
                    ),
                },
                ["sql"],
            ),
        ),
        mcp_tool(
            "warehouse_export_csv",
            "Run a query and write the result to a CSV file in the shared exports bucket. "
            "Returns a signed download link that expires after 24 hours.",
            model(
                "Export Csv Arguments",
                {
                    "sql": field("Sql", STR),
                    "filename": field(
                        "Filename",
                        {"pattern": "^[\\w.-]+\\.csv$", "type": "string"},
                        examples=["credit-notes-2025-03.csv"],
                    ),
                    "delimiter": field(
                        "Delimiter", {"maxLength": 1, "minLength": 1, "type": "string"}, default=","
                    ),
                    "include_header": field("Include Header", BOOL, default=True),
                },
                ["sql", "filename"],
            ),
        ),
    ]


def mcp_fastmcp_request() -> dict[str, JSON]:
    return {
        "model": "claude-3-7-sonnet-20250219",
        "max_tokens": 4096,
        "system": MCP_SERVER_INSTRUCTIONS,
        "messages": [
            {
                "role": "user",
                "content": "Open a high-priority LEDGER issue: credit notes for März are off by "
                "one cent. Label it bug and assign it to mhoffmann.",
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll create the issue in the tracker."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01Ry8Qf3Lm6Vd2Xn9Kc4Tb7W",
                        "name": "tracker_create_issue",
                        "input": {
                            "project": "LEDGER",
                            "title": "Credit notes for März are off by one cent",
                            "priority": "high",
                            "labels": [{"name": "bug", "color": None}],
                            "assignee": "mhoffmann",
                        },
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01Ry8Qf3Lm6Vd2Xn9Kc4Tb7W",
                        "content": [
                            {
                                "type": "text",
                                "text": '{"key":"LEDGER-412","url":"https://tracker.example.'
                                'com/LEDGER-412"}',
                            }
                        ],
                    }
                ],
            },
        ],
        "tools": mcp_fastmcp_tools(),
        "tool_choice": {"type": "auto"},
    }


# OpenAI Chat Completions as the OpenAI Python SDK sends it.


def chat_tool(name: str, description: str, parameters: JSON, *, strict: bool | None = None) -> JSON:
    function: dict[str, JSON] = {"name": name, "description": description, "parameters": parameters}
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def openai_chat_tools() -> list[JSON]:
    return [
        chat_tool(
            "get_invoice",
            "Fetch one invoice with its lines, totals and payment state.",
            {
                "type": "object",
                "title": "GetInvoice",
                "properties": {
                    "invoice_id": {
                        "type": "string",
                        "title": "Invoice Id",
                        "description": "Invoice number such as INV-2025-0342",
                        "examples": ["INV-2025-0342"],
                    }
                },
                "required": ["invoice_id"],
            },
        ),
        chat_tool(
            "search_invoices",
            "Search invoices by customer, date range and state. Returns at most 50 summaries.",
            {
                "type": "object",
                "title": "SearchInvoices",
                "properties": {
                    "customer": {"type": "string", "title": "Customer"},
                    "issued_after": {"type": "string", "format": "date", "title": "Issued After"},
                    "issued_before": {
                        "type": "string",
                        "format": "date",
                        "title": "Issued Before",
                    },
                    "state": {
                        "type": "string",
                        "enum": ["draft", "sent", "paid", "overdue", "void"],
                        "title": "State",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20},
                },
            },
        ),
        chat_tool(
            "create_credit_note",
            "Create a credit note against an issued invoice. Amounts are decimal strings in the "
            "invoice currency; every line must reference a line of the original invoice.",
            {
                "type": "object",
                "properties": {
                    "invoice_id": {"type": "string", "description": "Invoice to credit"},
                    "reason": {
                        "type": "string",
                        "enum": ["return", "discount", "correction", "goodwill"],
                    },
                    "lines": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "invoice_line": {"type": "integer"},
                                "amount": {
                                    "type": "string",
                                    "pattern": "^-?\\d+\\.\\d{2}$",
                                    "description": "Negative amount, two decimals",
                                },
                                "note": {"type": ["string", "null"]},
                            },
                            "required": ["invoice_line", "amount", "note"],
                            "additionalProperties": False,
                        },
                    },
                    "notify_customer": {"type": "boolean"},
                },
                "required": ["invoice_id", "reason", "lines", "notify_customer"],
                "additionalProperties": False,
            },
            strict=True,
        ),
        chat_tool(
            "convert_currency",
            "Convert an amount between currencies at the European Central Bank reference rate "
            "of a given day.",
            {
                "type": "object",
                "title": "ConvertCurrency",
                "properties": {
                    "amount": {"type": "string", "title": "Amount", "example": "129.90"},
                    "from_currency": {
                        "type": "string",
                        "title": "From Currency",
                        "minLength": 3,
                        "maxLength": 3,
                    },
                    "to_currency": {
                        "type": "string",
                        "title": "To Currency",
                        "minLength": 3,
                        "maxLength": 3,
                    },
                    "on": {
                        "type": "string",
                        "format": "date",
                        "title": "On",
                        "description": "Rate date; today when omitted",
                    },
                },
                "required": ["amount", "from_currency", "to_currency"],
            },
        ),
        chat_tool(
            "send_email",
            "Send an email from the billing mailbox. Attach documents by their ids.",
            {
                "type": "object",
                "properties": {
                    "to": {"type": "array", "items": {"type": "string", "format": "email"}},
                    "subject": {"type": "string", "title": "Subject"},
                    "body": {
                        "type": "string",
                        "description": "Plain text; markdown is not rendered",
                    },
                    "attachments": {
                        "type": "array",
                        "items": {"type": "string"},
                        "default": [],
                    },
                },
                "required": ["to", "subject", "body"],
            },
        ),
        chat_tool(
            "get_exchange_rates",
            "Deprecated: use convert_currency. Lists reference rates for a day.",
            {
                "type": "object",
                "deprecated": True,
                "properties": {"day": {"type": "string", "format": "date"}},
            },
        ),
    ]


def openai_chat_request() -> dict[str, JSON]:
    return {
        "messages": [
            {
                "role": "system",
                "content": "You are the billing assistant of a small bookkeeping firm. Use the "
                "tools to look things up; never invent invoice numbers or amounts.",
            },
            {
                "role": "user",
                "content": "Müller AG says INV-2025-0342 charged 3 × 43.30 € instead of "
                "2 ×. Credit the extra unit and let them know.",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_Qm3Vx8Lr2Kd7Pw5Zt1Hn6Bc",
                        "type": "function",
                        "function": {
                            "name": "get_invoice",
                            "arguments": '{"invoice_id":"INV-2025-0342"}',
                        },
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_Qm3Vx8Lr2Kd7Pw5Zt1Hn6Bc",
                "content": '{"id":"INV-2025-0342","customer":"Müller AG","currency":"EUR",'
                '"lines":[{"line":1,"item":"Beratung (Stunde)","qty":3,"unit":"43.30"}],'
                '"total":"129.90","state":"sent"}',
            },
        ],
        "model": "gpt-4.1-2025-04-14",
        "parallel_tool_calls": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "tool_choice": "auto",
        "tools": openai_chat_tools(),
    }


# OpenAI Responses API as Codex CLI sends it.


def responses_tool(name: str, description: str, parameters: JSON, *, strict: bool = False) -> JSON:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "strict": strict,
        "parameters": parameters,
    }


def closed_object(properties: dict[str, JSON], required: list[str]) -> JSON:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


CODEX_INSTRUCTIONS = """\
You are a coding agent running in a terminal-based assistant. You and the user share one \
workspace; your job is to finish the user's request and leave the workspace in a state they \
can review.

# How you work
- Read before you write: inspect the relevant files with the shell before editing them.
- Make edits with apply_patch. Never write files with cat or echo redirections.
- Keep changes minimal and focused on the request; do not fix unrelated issues, but mention \
them in your final message.
- Keep the plan updated with update_plan for tasks of more than two steps.

# Shell
- Prefer rg for searching text and rg --files for listing files; they are much faster than \
grep and find.
- Commands run in a sandbox. If a command fails because it needs the network or writes \
outside the workspace, rerun it with with_escalated_permissions and a one-sentence \
justification.

# apply_patch format
*** Begin Patch
*** Update File: path/to/file.py
@@ def example():
-    return 1
+    return 2
*** End Patch

# Final message
Summarize what you changed and how you verified it in a few short bullet points. Reference \
files as path:line. Do not paste whole files back to the user."""


def codex_tools() -> list[JSON]:
    return [
        responses_tool(
            "shell",
            "Runs a shell command and returns its output. Always set workdir; avoid `cd`.",
            closed_object(
                {
                    "command": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The command to execute, as argv",
                    },
                    "workdir": {"type": "string", "description": "The working directory"},
                    "timeout_ms": {"type": "number", "description": "Timeout in milliseconds"},
                    "with_escalated_permissions": {
                        "type": "boolean",
                        "description": "Run outside the sandbox; requires user approval",
                    },
                    "justification": {
                        "type": "string",
                        "description": "One sentence explaining why escalation is needed",
                    },
                },
                ["command"],
            ),
        ),
        responses_tool(
            "apply_patch",
            "Use apply_patch to edit files. The input is a patch in the envelope format "
            "described in the instructions: *** Begin Patch, one or more *** Add File / *** "
            "Update File / *** Delete File sections, *** End Patch. Paths are relative to the "
            "workspace root; never use absolute paths.",
            closed_object(
                {"input": {"type": "string", "description": "The entire contents of the patch"}},
                ["input"],
            ),
        ),
        responses_tool(
            "update_plan",
            "Updates the task plan. Give an optional explanation and a list of steps, each "
            "with a status. At most one step may be in_progress at a time.",
            closed_object(
                {
                    "explanation": {"type": "string"},
                    "plan": {
                        "type": "array",
                        "description": "The list of steps",
                        "items": closed_object(
                            {
                                "step": {"type": "string"},
                                "status": {
                                    "type": "string",
                                    "description": "One of: pending, in_progress, completed",
                                },
                            },
                            ["step", "status"],
                        ),
                    },
                },
                ["plan"],
            ),
        ),
        responses_tool(
            "view_image",
            "Attach a local image (by filesystem path) to the conversation context for this turn.",
            closed_object(
                {"path": {"type": "string", "description": "Local filesystem path to an image"}},
                ["path"],
            ),
        ),
        {
            "type": "namespace",
            "name": "mcp_github",
            "description": "Tools from the github MCP server",
            "tools": [
                responses_tool(
                    "get_pull_request",
                    "Get a pull request with its state, branches, mergeability and review "
                    "decision.",
                    {
                        "type": "object",
                        "title": "GetPullRequestInput",
                        "properties": {
                            "owner": {"type": "string", "title": "Owner"},
                            "repo": {"type": "string", "title": "Repo"},
                            "pull_number": {"type": "integer", "title": "Pull Number"},
                        },
                        "required": ["owner", "repo", "pull_number"],
                    },
                ),
                responses_tool(
                    "list_pull_request_files",
                    "List the files changed by a pull request with additions, deletions and "
                    "patch hunks.",
                    {
                        "type": "object",
                        "properties": {
                            "owner": {"type": "string"},
                            "repo": {"type": "string"},
                            "pull_number": {"type": "integer"},
                            "per_page": {
                                "type": "integer",
                                "maximum": 100,
                                "examples": [30],
                            },
                        },
                        "required": ["owner", "repo", "pull_number"],
                    },
                ),
                responses_tool(
                    "create_review_comment",
                    "Comment on a line of a pull request diff. side is LEFT for the base and "
                    "RIGHT for the head.",
                    {
                        "type": "object",
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "properties": {
                            "owner": {"type": "string"},
                            "repo": {"type": "string"},
                            "pull_number": {"type": "integer"},
                            "path": {"type": "string", "description": "File path in the repo"},
                            "line": {"type": "integer"},
                            "side": {"type": "string", "enum": ["LEFT", "RIGHT"]},
                            "body": {"type": "string", "title": "Comment body"},
                        },
                        "required": ["owner", "repo", "pull_number", "path", "line", "body"],
                    },
                ),
            ],
        },
        {"type": "web_search"},
    ]


CODEX_ADDITIONAL_TOOLS = [
    responses_tool(
        "read_mcp_resource",
        "Read a resource exposed by an MCP server, by server name and resource URI.",
        {
            "type": "object",
            "title": "ReadMcpResourceArgs",
            "properties": {
                "server": {"type": "string", "title": "Server"},
                "uri": {"type": "string", "title": "Uri", "format": "uri"},
            },
            "required": ["server", "uri"],
            "additionalProperties": False,
        },
    ),
    responses_tool(
        "list_mcp_resources",
        "List the resources MCP servers expose. Use the cursor from a previous call to page.",
        {
            "type": "object",
            "title": "ListMcpResourcesArgs",
            "properties": {
                "server": {
                    "type": "string",
                    "title": "Server",
                    "description": "Only list this server's resources",
                },
                "cursor": {"type": "string", "title": "Cursor"},
            },
            "additionalProperties": False,
        },
    ),
]

CODEX_SEARCHED_TOOLS = [
    responses_tool(
        "merge_pull_request",
        "Merge a pull request with the given method once its checks have passed.",
        {
            "type": "object",
            "title": "MergePullRequestInput",
            "properties": {
                "owner": {"type": "string"},
                "repo": {"type": "string"},
                "pull_number": {"type": "integer"},
                "merge_method": {
                    "type": "string",
                    "enum": ["merge", "squash", "rebase"],
                    "default": "squash",
                },
            },
            "required": ["owner", "repo", "pull_number"],
        },
    ),
]


def codex_input() -> list[JSON]:
    return [
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/home/dev/ledger-rs</cwd>\n  "
                    "<approval_policy>on-request</approval_policy>\n  <sandbox_mode>"
                    "workspace-write</sandbox_mode>\n  <network_access>restricted"
                    "</network_access>\n  <shell>zsh</shell>\n</environment_context>",
                }
            ],
        },
        {
            "type": "additional_tools",
            "tools": CODEX_ADDITIONAL_TOOLS,
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "PR #57 adds a --json flag to `ledger export`. Check that the "
                    "flag is documented in the README, and merge it if CI is green.",
                }
            ],
        },
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["rg","-n","--json","README.md","src/cli.rs"],'
            '"workdir":"/home/dev/ledger-rs"}',
            "call_id": "call_x7Rk2Pq9Wm4Ty6Vb1Nc8Ld3",
        },
        {
            "type": "function_call_output",
            "call_id": "call_x7Rk2Pq9Wm4Ty6Vb1Nc8Ld3",
            "output": '{"output":"README.md:88:    ledger export --json > out.json  # one '
            'object per line\\nsrc/cli.rs:41:    #[arg(long)] json: bool,\\n","metadata":'
            '{"exit_code":0,"duration_seconds":0.1}}',
        },
        {
            "type": "tool_search_call",
            "call_id": "ts_3Hc8Vn1Qk6Rz9Wd2Jp5Lm7T",
            "status": "completed",
            "execution": "client",
            "arguments": {"query": "merge pull request"},
        },
        {
            "type": "tool_search_output",
            "call_id": "ts_3Hc8Vn1Qk6Rz9Wd2Jp5Lm7T",
            "status": "completed",
            "execution": "client",
            "tools": CODEX_SEARCHED_TOOLS,
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": "The flag is documented at README.md:88. I'll check CI on PR #57 "
                    "before merging.",
                }
            ],
        },
    ]


def codex_request() -> dict[str, JSON]:
    return {
        "model": "gpt-5-codex",
        "instructions": CODEX_INSTRUCTIONS,
        "input": codex_input(),
        "tools": codex_tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "7d3f0b6e-2c9a-4f81-b5e4-0a6c8d2f1e93",
    }


# Gemini generateContent as Gemini CLI sends it.


def gemini_declarations() -> list[JSON]:
    return [
        {
            "name": "list_directory",
            "description": "Lists the names of files and subdirectories directly within a "
            "directory. Can optionally ignore entries matching glob patterns.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "path": {
                        "type": "STRING",
                        "description": "The absolute path to the directory to list",
                        "example": "/home/dev/ledger/src",
                    },
                    "ignore": {
                        "type": "ARRAY",
                        "items": {"type": "STRING"},
                        "description": "Glob patterns to ignore",
                    },
                    "respect_git_ignore": {
                        "type": "BOOLEAN",
                        "description": "Whether to respect .gitignore patterns. Defaults to true.",
                    },
                },
                "required": ["path"],
            },
        },
        {
            "name": "read_file",
            "description": "Reads and returns the content of a file. Text files can be read in "
            "slices with offset and limit; images and PDFs are returned as inline data.",
            "parameters": {
                "type": "OBJECT",
                "title": "ReadFileParams",
                "properties": {
                    "absolute_path": {
                        "type": "STRING",
                        "title": "Absolute path",
                        "description": "The absolute path to the file; relative paths are "
                        "rejected.",
                    },
                    "offset": {"type": "NUMBER", "description": "0-based line to start at"},
                    "limit": {"type": "NUMBER", "description": "Maximum number of lines"},
                },
                "required": ["absolute_path"],
            },
        },
        {
            "name": "search_file_content",
            "description": "Searches for a regular expression in file contents within a "
            "directory, filtered by a glob. Returns matching lines with paths and numbers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "The regular expression to search for",
                        "example": "round_(line|credit)",
                    },
                    "path": {"type": "string", "description": "Directory to search in"},
                    "include": {
                        "type": "string",
                        "description": "Glob pattern to filter files",
                        "example": "*.py",
                    },
                },
                "required": ["pattern"],
            },
        },
        {
            "name": "glob",
            "description": "Finds files matching a glob pattern, sorted by modification time, "
            "newest first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The glob pattern"},
                    "path": {"type": "string", "description": "Directory to search in"},
                    "case_sensitive": {"type": "boolean"},
                    "respect_git_ignore": {"type": "boolean"},
                },
                "required": ["pattern"],
            },
        },
        {
            "name": "replace",
            "description": "Replaces text within a file. By default replaces a single "
            "occurrence; set expected_replacements to replace several. Always read the file "
            "first and include enough context in old_string to make it unique.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "file_path": {"type": "STRING", "title": "File path"},
                    "old_string": {"type": "STRING", "description": "The exact text to replace"},
                    "new_string": {"type": "STRING", "description": "The replacement text"},
                    "expected_replacements": {
                        "type": "INTEGER",
                        "minimum": 1,
                        "description": "Number of replacements expected; defaults to 1",
                    },
                },
                "required": ["file_path", "old_string", "new_string"],
            },
        },
        {
            "name": "write_file",
            "description": "Writes content to a file, creating parent directories as needed.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "file_path": {"type": "STRING"},
                    "content": {"type": "STRING"},
                },
                "required": ["file_path", "content"],
            },
        },
        {
            "name": "run_shell_command",
            "description": "Executes a command with bash -c and returns stdout, stderr, the "
            "exit code and any background process ids. Commands that modify the system ask "
            "the user for confirmation first.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "command": {"type": "STRING", "example": "git status --short"},
                    "description": {
                        "type": "STRING",
                        "description": "Brief description of the command for the user",
                    },
                    "directory": {
                        "type": "STRING",
                        "description": "Directory to run in, relative to the project root",
                    },
                },
                "required": ["command"],
            },
        },
        {
            "name": "web_fetch",
            "description": "Processes content from up to 20 URLs embedded in a prompt, e.g. "
            "'Summarize https://example.com/changelog'.",
            "parameters": {
                "type": "OBJECT",
                "properties": {"prompt": {"type": "STRING"}},
                "required": ["prompt"],
            },
        },
        {
            "name": "save_memory",
            "description": "Saves a short fact about the user or their preferences to "
            "long-term memory, for use in future sessions.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "fact": {
                        "type": "STRING",
                        "title": "Fact",
                        "example": "Prefers pytest over unittest",
                    }
                },
                "required": ["fact"],
            },
        },
        {
            "name": "google_web_search",
            "description": "Performs a web search and returns the results with sources.",
            "parameters": {
                "type": "OBJECT",
                "properties": {"query": {"type": "STRING"}},
                "required": ["query"],
            },
        },
        {
            "name": "tracker_get_issue",
            "description": "Fetch one issue with its description, state, labels and comments.",
            "parametersJsonSchema": {
                "$schema": DRAFT_07,
                "type": "object",
                "title": "get_issueArguments",
                "properties": {
                    "project": {"type": "string", "title": "Project"},
                    "number": {"type": "integer", "title": "Number", "exclusiveMinimum": 0},
                },
                "required": ["project", "number"],
                "additionalProperties": False,
            },
        },
        {
            "name": "tracker_list_issues",
            "description": "List issues of a project, newest first.",
            "parametersJsonSchema": {
                "$schema": DRAFT_07,
                "type": "object",
                "title": "list_issuesArguments",
                "properties": {
                    "project": {"type": "string", "title": "Project"},
                    "state": {
                        "anyOf": [
                            {"type": "string", "enum": ["open", "in_progress", "closed"]},
                            {"type": "null"},
                        ],
                        "default": None,
                        "title": "State",
                    },
                    "limit": {
                        "type": "integer",
                        "title": "Limit",
                        "minimum": 1,
                        "maximum": 100,
                        "default": 20,
                    },
                },
                "required": ["project"],
            },
        },
        {
            "name": "docs_search",
            "description": "Search the team's internal documentation and return the best "
            "matching passages with links.",
            "parametersJsonSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": "urn:docs-server:search",
                "type": "object",
                "title": "SearchArgs",
                "properties": {
                    "query": {"type": "string", "examples": ["rounding policy"]},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                },
                "required": ["query"],
            },
        },
    ]


def gemini_request() -> dict[str, JSON]:
    return {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {
                        "text": "This is the Gemini CLI. We are setting up the context for our "
                        "chat.\nToday's date is Saturday, June 14, 2025.\nMy operating system "
                        "is: linux\nI'm currently working in the directory: /home/dev/ledger"
                    }
                ],
            },
            {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]},
            {
                "role": "user",
                "parts": [{"text": "Where do we round credit notes? Show me the function."}],
            },
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {
                            "name": "search_file_content",
                            "args": {"pattern": "def round_credit", "include": "*.py"},
                        }
                    }
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "search_file_content-1749888000000-3f9a1c",
                            "name": "search_file_content",
                            "response": {
                                "output": 'Found 1 match for pattern "def round_credit" in '
                                'path "." (filter: "*.py"):\n---\nFile: '
                                "src/ledger/rounding.py\nL13: def round_credit(amount: "
                                "Decimal) -> Decimal:\n---"
                            },
                        }
                    }
                ],
            },
        ],
        "systemInstruction": {
            "role": "user",
            "parts": [
                {
                    "text": "You are an interactive CLI agent specializing in software "
                    "engineering tasks. Follow the project's conventions, verify changes with "
                    "its tests, and keep answers short — the user reads them in a terminal."
                }
            ],
        },
        "tools": [{"functionDeclarations": gemini_declarations()}],
        "generationConfig": {
            "temperature": 0,
            "topP": 1,
            "thinkingConfig": {"includeThoughts": True, "thinkingBudget": -1},
        },
    }


# Assembly, self-check and summary.

CAPTURES: dict[str, tuple[Callable[[], JSON], Callable[[JSON], bytes]]] = {
    "claude-code.anthropic.json": (claude_code_request, dumps_compact),
    "mcp-fastmcp.anthropic.json": (mcp_fastmcp_request, dumps_compact),
    "openai-chat.json": (openai_chat_request, dumps_python_default),
    "openai-responses.codex.json": (codex_request, dumps_compact),
    "gemini-cli.json": (gemini_request, dumps_compact),
}


def tool_schemas(body: JSON) -> Iterator[tuple[str, JSON, bool]]:
    """Yield (tool name, schema, is JSON Schema) for every tool schema in a request body.

    Gemini `parameters` is an OpenAPI subset (upper-case types), so it is flagged False.
    """
    for tool in body.get("tools", []):
        if "input_schema" in tool:
            yield tool["name"], tool["input_schema"], True
        elif "function" in tool:
            yield tool["function"]["name"], tool["function"]["parameters"], True
        elif tool.get("type") == "namespace":
            for member in tool["tools"]:
                yield f"{tool['name']}.{member['name']}", member["parameters"], True
        elif "parameters" in tool:
            yield tool["name"], tool["parameters"], True
        for declaration in tool.get("functionDeclarations", []):
            if "parametersJsonSchema" in declaration:
                yield declaration["name"], declaration["parametersJsonSchema"], True
            else:
                yield declaration["name"], declaration["parameters"], False
    for item in body.get("input", []):
        if item.get("type") in ("additional_tools", "tool_search_output"):
            for tool in item["tools"]:
                yield tool["name"], tool["parameters"], True


def count_tools(tools: list[JSON]) -> int:
    """Callable tools in a `tools` array: namespace members and declarations count one each."""
    total = 0
    for tool in tools:
        if tool.get("type") == "namespace":
            total += len(tool["tools"])
        elif "functionDeclarations" in tool:
            total += len(tool["functionDeclarations"])
        else:
            total += 1
    return total


def lower_types(schema: JSON) -> JSON:
    """Gemini's OpenAPI-subset schema with `type` lower-cased, to check it as JSON Schema."""
    if isinstance(schema, dict):
        return {
            key: value.lower() if key == "type" and isinstance(value, str) else lower_types(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [lower_types(item) for item in schema]
    return schema


def check(name: str, body: JSON, data: bytes) -> None:
    """Fail loudly if a capture is not valid JSON or holds an invalid tool schema."""
    if json.loads(data) != body:
        raise SystemExit(f"{name}: does not round-trip through JSON")
    try:
        from jsonschema.validators import validator_for
    except ImportError:
        print(f"{name}: jsonschema not installed, schema check skipped", file=sys.stderr)
        return
    for tool_name, schema, is_json_schema in tool_schemas(body):
        candidate = schema if is_json_schema else lower_types(schema)
        try:
            validator_for(candidate).check_schema(candidate)
        except Exception as error:
            raise SystemExit(f"{name}: tool {tool_name}: invalid schema: {error}") from error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'file':<30} {'bytes':>8} {'tools':>6} {'tools bytes':>12}")
    for name, (build, serialize) in CAPTURES.items():
        body = build()
        data = serialize(body)
        check(name, body, data)
        (args.out / name).write_bytes(data)
        tools_bytes = len(serialize(body["tools"]))
        print(f"{name:<30} {len(data):>8} {count_tools(body['tools']):>6} {tools_bytes:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
