"""Write the request bodies in captures/: one client's request each, with that client's shape and
annotation profile as measured on the versions named in captures/README.md.

Stdlib only and deterministic: every value is a literal or built from literals, so two runs give
identical bytes. All prose (prompts, tool and parameter descriptions, transcripts) is written for
this project; tool names, parameter names, types, key order and annotations follow the clients.
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
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def dumps_compact(value: JSON) -> bytes:
    """Serialize like JSON.stringify, serde_json and httpx>=0.28: no spaces, raw UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps_python_default(value: JSON) -> bytes:
    """Serialize with `json.dumps` defaults (as `requests` and aiohttp `json=` do): `", "` and
    `": "` separators, ASCII-only escapes."""
    return json.dumps(value).encode("ascii")


# Guidance that every agent's system prompt carries in some form. Each client's prompt below
# is its own opening plus a selection of these sections, so the prompts have realistic sizes
# without repeating the products' own text.
GUIDE = {
    "sandbox": """\
# Sandbox and permissions

Commands run inside a sandbox by default. It allows reading most of the filesystem, writing \
inside the working directory and the system temporary folder, and no network access except \
to the package registries the user has allowed.

- When a command fails with "Operation not permitted", "Read-only file system" or a \
connection error, the sandbox is the likely cause. Do not try to work around it with other \
tools or with clever shell tricks.
- Instead, ask for the same command to run with more access and explain in one sentence why \
it needs it; the user is then asked to approve it.
- Never ask for more access for commands that delete files outside the project, change \
system configuration, or send data to hosts the user did not mention.
- Commands that only read (git log, ls, cat of a log file, pytest --collect-only) never need \
more access; if one fails, look for the real error first.""",
    "long_running": """\
# Long-running processes

- Development servers, file watchers and `docker compose up` never exit by themselves. Start \
them in the background and check their output until they report that they are ready (for \
example "Listening on http://127.0.0.1:8000").
- Test suites and builds usually finish; run them in the foreground with a timeout that fits \
the project. A full build of a large project can take several minutes, so raise the timeout \
rather than splitting the build into pieces.
- Stop background processes when you no longer need them, and always before you tell the \
user the task is done.""",
    "output": """\
# Reading command output

- Exit codes matter: a command that printed nothing but exited non-zero has failed. Report \
the failure to the user instead of assuming success.
- Many tools print warnings to stderr even when they succeed; both streams are shown to you, \
stderr after stdout.
- When output is cut, rerun the command with a narrower scope (one test file, one package) \
instead of reading the truncated output again.""",
    "tooling": """\
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
say which one and how the project expects it to be installed.""",
    "secrets": """\
# Secrets

- Never print secrets: do not `cat` .env files, credential stores or key files, and do not \
run `env` or `printenv` without filtering out tokens. If you need to know whether a variable \
is set, test for it: `test -n "$DATABASE_URL" && echo set`.
- Never pass tokens on the command line where they end up in shell history and process \
lists; use the environment or a file the tool reads.
- If a command's output unexpectedly contains a secret, do not repeat it in your reply and \
tell the user so they can rotate it.""",
    "debugging": """\
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
not claim a fix you could not verify.""",
    "examples": """\
# Examples

<example>
Task: find out why the integration tests fail only in CI.
Good: run `git diff origin/main --stat` and the failing test file in parallel, then run the \
single failing test with `-x -vv` and read the first traceback.
Bad: rerun the whole suite three times hoping the failure goes away.
</example>

<example>
Task: check which Python the project uses.
Good: read .python-version or the requires-python field, then run `uv run python --version`.
Bad: `python --version`, which reports whatever interpreter is first on PATH.
</example>

<example>
Task: clean up build artefacts.
Good: `rm -rf /home/dev/ledger/build /home/dev/ledger/dist` after a listing confirmed both \
are inside the project.
Bad: `rm -rf build/*` from a directory you did not check, or any `rm -rf` with a variable \
that might be empty.
</example>""",
    "commits": """\
# Committing changes with git

Only create a commit when the user asks for one. If it is unclear whether they want one, ask \
first — an unwanted commit is more annoying than a question. When you are asked to commit:

1. Run these commands together so they run in parallel:
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
  - Never use `git reset --hard`, `git checkout -- .`, `git clean -fd` or `git stash drop` \
unless the user asked for exactly that: they throw away work that cannot be recovered.
  - If the user has uncommitted changes you did not make, leave them alone; stage only the \
files you changed.
  - Do not bypass hooks with --no-verify; a failing hook is information.""",
    "pull_requests": """\
# Creating pull requests

Use the gh command for everything on GitHub: issues, pull requests, checks and releases. If \
the user gives you a GitHub URL, use gh to fetch what it points to.

When asked to open a pull request:

1. Run in parallel: `git status`, `git diff`, `git log` and `git diff <base-branch>...HEAD`, \
and check whether the branch tracks a remote and is up to date with it.
2. Look at EVERY commit that will be in the pull request, not only the newest one, and draft \
a title and a summary from all of them.
3. Run in parallel: create the branch if needed, push it with -u if it has no upstream, and \
create the pull request with a heredoc body:
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
- Find the pull request for the current branch: gh pr view --json number,url,state""",
    "planning": """\
# Planning and tracking work

Keep a short task list when the work needs three or more distinct steps, when the user gives \
several tasks at once, or when new instructions arrive while you work. Skip it for a single \
simple change or a purely informational question.

1. States: pending (not started), in progress (being worked on now, only one at a time) and \
completed (finished and verified).
2. Update the list as you go: mark a task completed as soon as it is done, not in batches, \
and remove tasks that no longer matter instead of leaving them pending.
3. Only mark a task completed when it is fully done. If tests fail, the implementation is \
partial, or an error is unresolved, keep it in progress and add a task for what blocks you.
4. Name tasks with a verb and the thing changed: "Fix rounding of credit notes", not "Fix \
bug". Keep each item to one line; details belong in your messages.

<example>
User: Add a --dry-run flag to the import command and make sure the tests still pass.
Plan: 1. Add --dry-run to the argument parser 2. Skip database writes when the flag is set \
3. Print what would be imported 4. Add tests for the flag 5. Run the test suite
</example>

<example>
User: Can you make the test suite faster? It takes twelve minutes.
Plan: measure first with --durations=25, then one task per bottleneck found (shared \
database fixture, event-based waits in the queue tests, parallel workers), then measure \
again and compare.
</example>""",
    "delegation": """\
# Working with sub-agents

Sub-agents have their own context window, so a long search or a wide investigation does not \
fill yours. Each one works on its own and reports back once.

- Start several at once when the tasks are independent.
- A sub-agent's final message comes back to you, not to the user. Summarize it for the user \
in your own words, and verify claims that decide what you do next.
- A sub-agent cannot see this conversation. Write a prompt that stands on its own: the goal \
in one sentence, the context it cannot see (the user's words, the files you already read, \
what you ruled out), what to return (file:line locations, a yes/no with evidence, a patch, a \
table of numbers) and the limits that matter ("do not edit files", "stay inside \
src/billing").
- Tell the sub-agent whether it may change code or should only research; it cannot know \
what the user asked you.
- Do not start a sub-agent for work you are about to do yourself anyway, and never start two \
sub-agents that edit the same files at the same time.
- When a sub-agent reports that it changed files, read the changed regions yourself before \
you tell the user the work is done; you are responsible for the result.""",
    "style": """\
# Tone and style

Be concise, direct and to the point. Your output is shown in a terminal and rendered as \
monospace markdown. Answer in a few lines unless the user asks for detail — not counting \
tool calls or generated code. Do not add preambles like "Here is what I will do" or \
summaries of what you just did unless asked.

When you point at code, use the pattern `file_path:line_number` so the user can jump there. \
Do not paste whole files back to the user; quote the few lines that matter.""",
    "conventions": """\
# Following conventions

Before changing a file, understand its conventions: mimic the style, use the libraries and \
utilities that are already there, and follow existing patterns. Never assume a library is \
available — check the manifest (pyproject.toml, package.json, Cargo.toml) or neighbouring \
imports first. Never commit secrets or log them.

Do what was asked, including obvious follow-up actions, but do not surprise the user with \
actions they did not request. If they ask how to approach something, answer first; do not \
jump straight to editing.""",
    "tasks": """\
# Doing tasks

1. Plan when the task has several steps.
2. Search the codebase to understand it; run searches in parallel when they are independent.
3. Implement the change with the available tools.
4. Verify it with the project's tests; find the test command in the README or the build \
files rather than guessing.
5. Run the linter and type checker the project uses (for example `ruff check` and `mypy`) \
when you have finished, and fix what they report.
6. Report what you changed and how you verified it in a few short bullet points.""",
    "editing": """\
# Editing files

- Read a file before you change it, and copy the text you replace exactly, indentation \
included.
- Prefer small, exact edits over rewriting a file; rewrite only when more than about half \
of it changes.
- Never edit a generated file (a lock file, a compiled bundle, a migration snapshot) instead \
of its source; find the generator and run it.
- Keep the file valid after every step, and match its line endings and final newline.
- Create new files only when the task needs them. Scratch notes, plans and summaries belong \
in your messages, not in files.""",
    "safety": """\
# Acting safely

Assist with authorized security testing, defensive work and education; refuse to write code \
whose purpose is to harm systems or people, whatever reason is given. Never guess URLs \
unless you are sure they help with programming.

Some actions are hard to undo: deleting files or branches, force-pushing, dropping database \
tables, sending messages or emails, publishing packages. Before one of these, make sure the \
user asked for exactly that action on exactly that target; when in doubt, ask. A short \
question costs less than lost work.""",
}


def guide(*names: str) -> str:
    """The named GUIDE sections, in the order given, separated by blank lines."""
    return "\n\n".join(GUIDE[name] for name in names)


# Claude Code 2.1.197 (`claude -p`): 24 built-in tools, input schemas from zod 4's
# toJSONSchema: `$schema` 2020-12 first, `description` before `type`, `additionalProperties`
# last, `required` only when something is. That `$schema` is the catalogue's only annotation.

AGENT_DESCRIPTION = """\
Starts a sub-agent that works on a complex, multi-step task on its own and reports back once.

Sub-agents have their own context window, so a long search or a wide investigation does not \
fill yours. The agent types you can pass in subagent_type are listed in the conversation; \
each has its own instructions and tool set. Leave subagent_type out for the general-purpose \
agent.

When NOT to use a sub-agent:
- To read a file whose path you already know: use Read, it is faster.
- To find one definition such as "class Ledger": search with Bash and rg.
- For work you are about to do yourself anyway.

Usage notes:
1. Start several sub-agents in one message when their tasks are independent.
2. The agent's last message comes back to you, not to the user; summarize it yourself.
3. The agent cannot see this conversation. Say what to do, which files matter, whether it \
may change code, and what its final message must contain.
4. Set run_in_background for long work and keep going; you are told when it finishes.
5. isolation "worktree" gives the agent its own git worktree, so its edits cannot collide \
with yours; "remote" runs it on a remote machine with a fresh checkout.
6. Trust its findings in general, but check the ones that decide what you do next.
"""

BASH_DESCRIPTION = """\
Runs a shell command in a persistent bash session and returns its output. The working \
directory and exported variables carry over between calls.

Use it for terminal work: builds, test suites, package managers, version control, searches \
with rg and one-off scripts. Read, Edit and Write exist for reading and changing files and \
show the user a reviewable result, so prefer them to cat, sed and echo redirections.

Usage notes:
- Quote every path that contains spaces: cd "/home/ana/My Projects/ledger".
- timeout is in milliseconds, at most 600000; the default is 120000.
- Give every call a description of 5-10 words in active voice so the user can follow the \
transcript.
- Output over 30000 characters is cut in the middle; narrow the command instead.
- Set run_in_background for servers and watchers; read their output later with TaskOutput \
and stop them with TaskStop. Do not append '&' yourself.
- Chain dependent commands with '&&'; send independent ones as separate calls in one message \
so they run in parallel.
- Use absolute paths rather than cd, so the working directory stays where the user expects.
- Never put secrets on the command line; they end up in the transcript and in shell history.
- Do not use interactive commands (git rebase -i, editors, pagers); nothing can answer them.
"""

CRON_CREATE_DESCRIPTION = """\
Schedules a prompt to run later, once or on a recurring schedule, in this session or in \
every future session of the project.

The schedule is a standard five-field cron expression in the user's local time zone: \
minute, hour, day of month, month, day of week. "*/15 * * * *" runs every fifteen minutes, \
"0 9 * * 1-5" at nine on weekdays, "30 18 1 * *" at half past six on the first of each month. \
Ranges, lists and steps work as in crontab; names of months and weekdays do not.

When the schedule fires, the prompt is delivered to the agent as if the user had typed it, \
with a note that it came from a scheduled job. Write the prompt so that it stands on its \
own: it may run hours from now, after the conversation has moved on or been compacted, so \
name the files, commands and conditions it needs instead of referring to "the above".

Choosing recurring and durable:
- recurring false (the default) runs the prompt once, at the next time the expression \
matches, and then deletes the job.
- recurring true keeps the job until it is deleted with CronDelete.
- durable false keeps the job in this session only; it disappears when the session ends.
- durable true stores the job in the project's settings so that later sessions run it too. \
Only use it when the user asked for something that should outlive this session, such as a \
nightly dependency check.

Good uses:
- "Check the deploy in 20 minutes and tell me whether the error rate dropped": one-off job \
at the matching minute.
- "Every morning at 8, summarize the CI failures of the last day": recurring, durable.
- "Keep an eye on the flaky test while I'm in the meeting": recurring every ten minutes, not \
durable, deleted when the user is back.

Expressions that come up often:
- "*/5 * * * *": every five minutes
- "0 * * * *": at the start of every hour
- "0 9 * * 1-5": at nine on weekdays
- "0 18 * * 5": Fridays at six in the evening
- "15 2 * * *": every night at a quarter past two
- "0 0 1 * *": at midnight on the first of each month
When the user gives a time in words ("tomorrow morning", "after lunch"), pick a concrete \
time, say which one you picked, and let them correct it. For a one-off job that should run \
a few minutes from now, compute the minute and hour from the current local time.

Limits:
- At most 20 jobs per project; list them with CronList and delete the ones that are done.
- The shortest interval is one minute. A job whose previous run is still going is skipped, \
not queued.
- Jobs only run while a Claude session for the project is open; nothing runs when the \
machine sleeps or the terminal is closed, and missed runs are not made up.
- A scheduled prompt has the same permissions as the session; it cannot approve anything \
the user has not approved.

Jobs created by a sub-agent belong to the session, not to the sub-agent. Returns the job \
id, the next three times the expression matches, and whether the job is \
durable. Tell the user when the job will first run, in their time zone, so they can correct \
a wrong expression before it fires.
"""

CRON_DELETE_DESCRIPTION = """\
Deletes a scheduled job by the id CronCreate or CronList returned. Durable jobs are removed \
from the project settings too. Deleting a job does not stop a run already in progress.
"""

CRON_LIST_DESCRIPTION = """\
Lists the scheduled jobs of this project with their ids, expressions, prompts and next runs.
"""

EDIT_DESCRIPTION = """\
Replaces an exact string in a file. Read the file first in this conversation; copy \
old_string from the Read output without the line-number prefix, indentation included. The \
edit fails if old_string is not unique: add surrounding lines, or set replace_all to change \
every occurrence (for renames within one file). Prefer editing to rewriting a file.
"""

ENTER_WORKTREE_DESCRIPTION = """\
Moves this session into a separate git worktree, so that the work you do next happens on \
its own branch in its own directory and cannot collide with uncommitted changes in the \
user's checkout.

When to use it:
- The user asks you to work on something in isolation, "in a worktree", or "without \
touching my working copy".
- You are about to make a large or risky change (a dependency upgrade, a sweeping rename) \
while the user still has uncommitted work of their own in the main checkout.
- Several sessions or sub-agents will work on the same repository at the same time and must \
not edit the same files.

When NOT to use it:
- For small edits the user will review right away; the main checkout is simpler.
- Outside a git repository: the tool fails and changes nothing.
- When a worktree for the task already exists; pass its path instead of creating another.

What happens:
1. A new branch is created from the current HEAD, named after name (letters, digits and \
dashes; a short suffix is added when the name is taken). Without a name, one is made up \
from the task.
2. A worktree for that branch is created under .claude/worktrees/ in the repository, or at \
path when given. An existing worktree at path is reused as it is.
3. The session's working directory moves there. Relative paths, shell commands and file \
tools now refer to the worktree; the original checkout is left exactly as it was.
4. Ignored files (virtual environments, node_modules, build output) are not copied. Install \
dependencies in the worktree before running tests, using the project's usual command.

Afterwards:
- Commit in the worktree as usual; its branch is a normal branch that can be pushed and \
turned into a pull request.
- Leave the worktree with ExitWorktree, which can keep it for later or remove it.
- Tell the user the branch name and the worktree path, so they can find the work after the \
session.
- Run the project's tests in the worktree before you report that the work is done; a \
worktree has its own build output, so an earlier build in the main checkout does not count.

Cleaning up:
- Worktrees take disk space and keep their branches checked out. When the work has been \
merged or abandoned, remove the worktree with ExitWorktree from inside it, or tell the user \
how to remove it with `git worktree remove <path>` if the session has already left it.
- Never delete a worktree directory with rm: git keeps bookkeeping for it that then points \
at nothing. `git worktree prune` repairs that afterwards.
- A worktree's branch stays after the worktree is removed; delete the branch separately if \
the user wants it gone, and only after checking it has been merged.

Notes:
- Git allows a branch to be checked out in only one worktree at a time; you cannot enter a \
worktree for the branch the main checkout has checked out.
- Hooks and settings of the repository apply in the worktree too.
- Submodules are initialized in the new worktree only if they were initialized in the \
original checkout.
- Sub-agents started with isolation "worktree" get worktrees of their own; they do not share \
this one.
"""

EXIT_WORKTREE_DESCRIPTION = """\
Leaves the git worktree this session entered with EnterWorktree and returns to the original \
checkout.

action decides what happens to the worktree:
- "keep" leaves the worktree directory and its branch in place, so the user or a later \
session can continue there. Use it when the work is unfinished or the user wants to look at \
it first.
- "remove" deletes the worktree directory. The branch and its commits stay in the \
repository; only the directory goes.

Before leaving, check with git status in the worktree what would be lost: uncommitted \
edits, untracked files, commits that exist only on the worktree's branch and were never \
pushed. Removing a worktree that has uncommitted changes or untracked files fails, so that nothing \
is lost by accident. Commit what should be kept, then try again. Set discard_changes to true \
only when the user has said the uncommitted changes can be thrown away; the tool then \
removes the worktree with everything in it.

After leaving, the working directory is the original checkout again. Summarize for the user \
what was done in the worktree: the branch name, the commits made, whether the worktree was \
kept and where it is, and what is left to do.

Leaving does not push anything; push the branch first if the user wants the work on the \
remote. This tool only works in a session that entered a worktree with EnterWorktree; worktrees \
created by hand with git worktree are not touched.

Examples:
- The upgrade in the worktree is finished, committed and pushed, and the user will open the \
pull request: leave with action "remove"; the branch stays and the directory goes.
- The work is half done and the user wants to continue tomorrow: commit what you have on the \
worktree's branch, then leave with action "keep" and tell the user the path.
- The experiment failed and the user said to throw it away: leave with action "remove" and \
discard_changes true, then offer to delete the branch as well.
"""

NOTEBOOK_EDIT_DESCRIPTION = """\
Replaces, inserts or deletes one cell of a Jupyter notebook (.ipynb). notebook_path must be \
absolute. cell_id names the cell to change; with edit_mode=insert the new cell goes after it, \
or at the start when cell_id is omitted. edit_mode=delete removes the cell. cell_type is \
required when inserting. Cell ids are shown when you Read the notebook. Outputs of a \
replaced code cell are cleared; run the notebook again if the user needs fresh outputs, \
and say so when you changed code whose outputs the user relies on. Keep cells small and in \
execution order; a notebook that only works when its cells run out \
of order is a bug. Do not put secrets in cells: notebooks are often shared with their \
outputs.
"""

READ_DESCRIPTION = """\
Reads a file from the local filesystem. You may read any file the user can read; assume a \
path the user gave you is valid.

Usage:
- file_path must be absolute.
- Up to 2000 lines are read from the start of the file. For long files pass offset (the \
first line, counting from 1) and limit (the number of lines).
- The result is numbered like `cat -n`: a line number and a → arrow start each line. They \
are not part of the file; never copy them into Edit strings.
- Images are shown to you visually. PDFs are read as text and images; pass pages ("1-5", \
"3,7") for long documents. Notebooks come back with all cells and outputs.
- This tool reads files only; list directories with Bash (ls, or rg --files for a tree).
- Read several files in one message when they may all be relevant.
- Reading an empty file gives a warning instead of content.
"""

REPORT_FINDINGS_DESCRIPTION = """\
Reports the findings of a review to the user as one structured list, instead of prose in a \
message. Use it at the end of a code review, a security review or an audit the user asked \
for.

Each finding names a file and, when it applies, a line; says in one sentence what is wrong; \
and describes a concrete scenario in which it fails. Set verdict to CONFIRMED only when you \
reproduced the failure or read the code path end to end, PLAUSIBLE otherwise. Set outcome \
when you already acted on the finding. level is the review depth the user asked for. Report \
at most 32 findings, most serious first.
"""

SCHEDULE_WAKEUP_DESCRIPTION = """\
Pauses the current task and wakes this session up again after a delay, with a prompt that \
tells you what to do then. Use it to wait for something that takes a known amount of time \
and that you cannot watch directly: a deployment rolling out, a CI run finishing, a cache \
expiring, a rate limit resetting.

How it works:
- delaySeconds is how long to wait, from 10 seconds to 24 hours.
- reason is shown to the user while the session waits, in their terminal and in any \
notification, ("Waiting for the staging deploy to \
finish"), so they know the session is not stuck.
- prompt is delivered to you when the time is up, as if the user had sent it. It should say \
what to check and what to do with each possible result, because the details of the current \
turn may have been compacted away by then.

Prefer it to a sleep in Bash: a sleeping shell blocks the session and counts against the \
command timeout, while a scheduled wakeup frees the session for the user in the meantime. If \
the user sends a message before the delay is over, the wakeup still happens; mention in the \
prompt that the situation may have changed.

Good prompts:
- "Check `gh run view 91324 --json status,conclusion`. If it succeeded, merge the pull \
request with `gh pr merge 412 --squash`. If it failed, read the failing job's log and report \
the first error. If it is still running, schedule another wakeup in 5 minutes."
- "Fetch https://staging.example.com/healthz. If it reports version 3.4.1, run the smoke \
tests with `make smoke`; otherwise report the version it does report."

Bad prompts:
- "Continue." (you will not know with what)
- "Check whether it worked." (nothing says what "it" is or how to check)

What the user sees: while the session waits, the reason is shown with the time left, and \
the user may type as usual; their message is handled first and the wakeup comes afterwards.

Choosing the delay:
- Use the time the user or the tool output gave you, plus a small margin. A CI run that \
usually takes eight minutes is worth a wakeup after nine.
- For something with an unknown duration, wake up early and schedule another wakeup from \
the prompt if it is not done yet, rather than waiting once for a long time.
- Do not schedule wakeups more often than every few minutes for the same thing; every \
wakeup costs a model turn.

Examples:
- The user asked you to merge a pull request once its checks pass, and the checks usually \
take twelve minutes: schedule a wakeup after thirteen minutes whose prompt checks the status \
and either merges, reports the failure, or schedules another wakeup.
- A deployment is rolling out to three regions, one every five minutes: wake up after six \
minutes, check the first region's health endpoint, and continue region by region.

Only one wakeup can be pending per session; scheduling a new one replaces the old one. For \
work that should repeat on a schedule, use CronCreate instead.
"""

SEND_MESSAGE_DESCRIPTION = """\
Sends a message to another agent of this session: a sub-agent you started, or the main \
agent when you are a sub-agent. Use it to hand over information the other agent needs and \
cannot find itself, to answer a question it asked, or to tell it to stop or change course.

to is the agent's name as shown when it was started. message is plain text; say what you \
want the other agent to do with it, since it cannot ask you back before its next step. \
summary is a short line shown to the user in the transcript. Messages are delivered when \
the other agent finishes its current step; they do \
not interrupt a running tool. To stop an agent, use TaskStop instead.
"""

SKILL_DESCRIPTION = """\
Runs one of the skills available in this project, inside the conversation.

A skill is a folder of instructions, and sometimes scripts and reference files, that tells \
you how to do one kind of task the way the user or their team wants it done: how to write a \
release note, how to review a database migration, how to build the documentation site. The \
skills you can run are listed in the conversation with a one-line description each.

Usage:
- skill: the skill's name exactly as listed, e.g. "release-notes".
- args: optional arguments, passed as written; quote them the way the skill's description \
shows.

Rules:
- When the user's request matches a skill's description, use the skill rather than doing \
the task from scratch: it encodes decisions the user has already made.
- Only listed skills can be run. Built-in commands such as /help or /clear are not skills.
- Do not run a skill that is already running; its instructions are in the conversation.
- A skill's instructions may ask you to do several things; follow them like a user message, \
with a task list if there are several steps.
- If a skill's instructions conflict with what the user asked in this conversation, the \
user's request wins; mention the conflict.
- Skills may refer to files in their folder by relative path; the tool result says where \
the folder is.

Available skills:
- release-notes: Turn merged pull request titles into user-facing release notes (project)
- migration-review: Review a database migration for locking and rollback problems (project)
- explain-failure <job-url>: Fetch a failed CI job's log and explain the first error (user)
- deps-audit: List outdated and vulnerable dependencies with upgrade notes (user)
"""

TASK_CREATE_DESCRIPTION = """\
Adds a task to the session's task list. The list keeps track of multi-step work and shows \
the user how far along you are.

When to create tasks:
1. The work needs three or more distinct steps.
2. The user gives several things to do at once, numbered or separated by commas.
3. New instructions arrive while you work: add them as tasks right away.
4. You discover follow-up work while doing a task.

When NOT to:
1. There is a single, simple change.
2. The request is conversational or purely informational.
3. Tracking would take longer than doing: just do it.

Fields:
- subject: the imperative form, starting with a verb and naming the thing changed: "Fix \
rounding of credit notes", not "Fix bug".
- description: what done means for this task, in a sentence or two: the files involved, the \
command that proves it works, the edge cases to cover.
- activeForm: the continuous form shown while the task runs: "Fixing rounding of credit \
notes". Without it, the subject is shown.
- metadata: free-form key/value pairs for your own bookkeeping, such as the issue number.

Create the tasks you already know about in one go at the start, rather than one at a time \
as you reach them: the user then sees the whole plan and can correct it early. New tasks \
start as pending. Mark a task in_progress with TaskUpdate before you begin it, and \
completed as soon as it is done; keep only one task in progress at a time.

<example>
User: Add a --dry-run flag to the import command and make sure the tests still pass.
Tasks: "Add --dry-run to the argument parser", "Skip database writes when the flag is set", \
"Print what would be imported", "Add tests for the flag", "Run the test suite".
</example>

<example>
User: Rename getInvoiceTotal to computeInvoiceTotal everywhere.
After a search finds 14 uses in 6 files: one task per file, so none is forgotten.
</example>

<example>
User: What does the --strict flag of our import command do?
No tasks: reading two places in the code and answering is not multi-step work.
</example>

Tasks are shared with the sub-agents of this session. When you hand a task to a sub-agent, \
set its owner with TaskUpdate, so that the list shows who works on what.
"""

TASK_GET_DESCRIPTION = """\
Returns one task of the session's task list with all its fields: subject, description, \
activeForm, status, owner, the tasks it blocks and is blocked by, and its metadata. Use it \
before you start a task someone else created or that was created long ago, to read what \
done means for it, and before \
you mark a task completed, to check its description once more. taskId is the id TaskCreate \
or TaskList returned.

The description is where the definition of done lives: read it before you start and again \
before you finish, and compare it with what you actually did. If the task turned out to be \
different from what its description says, update the description with TaskUpdate rather than \
leaving a stale one behind.
"""

TASK_LIST_DESCRIPTION = """\
Lists the tasks of the session's task list with their ids, subjects, statuses and owners, \
in the order they were created. Tasks blocked by unfinished tasks are marked as blocked.

Use it:
- when you resume work after a pause or a compaction, to see what is done and what is left;
- before you create tasks, to avoid duplicates;
- when a sub-agent finished, to see which of its tasks it completed and which it left \
pending or in progress;
- before you tell the user the work is done: every task should be completed or removed.

The list is shared by the main agent and its sub-agents; the owner says who works on a task.

Reading the list:
- A task in_progress with no recent activity may belong to a sub-agent that stopped; check \
with TaskOutput before you take it over.
- Blocked tasks show the ids of the tasks they wait for; work on those first.
- Completed tasks stay in the list until the session ends, so the user can see what was done.
"""

TASK_OUTPUT_DESCRIPTION = """\
Reads the output of a background task: a shell command started with run_in_background, or a \
sub-agent started in the background.

- task_id is the id returned when the task was started.
- Returns the output produced since the last read and the task's status: running, \
completed, failed or stopped. A finished shell reports its exit code; a finished sub-agent \
its final message.
- block waits until the task finishes or the timeout passes, instead of returning at once. \
Use it when you have nothing else to do until the task is done.
- timeout is in milliseconds, at most ten minutes.

Poll sparingly: a server that is starting up needs a few seconds, and every read costs a \
round trip. You are told when a background task finishes, so you rarely need to poll at all.

Stopped tasks keep their output too. Output is kept for each task until the session ends. \
Reading it with block false right after \
starting a server shows whether it started; reading it again later shows only what is new.
"""

TASK_STOP_DESCRIPTION = """\
Stops a background task (a shell or a sub-agent) by its id. Stopping a shell also stops the \
processes it started; their output so far can still be read once.
"""

TASK_UPDATE_DESCRIPTION = """\
Changes a task of the session's task list: its status, subject, description, owner, \
dependencies or metadata. Only the fields you pass change.

Status:
- pending: not started yet.
- in_progress: being worked on now. Set it BEFORE you begin the task, and keep only one task \
in progress at a time.
- completed: finished and verified. Set it as soon as the task is done; do not batch \
completions.
- deleted: removes the task. Use it for tasks that no longer matter instead of leaving them \
pending.

Only mark a task completed when it is fully done. If tests fail, the implementation is \
partial or an error is unresolved, keep it in progress and create a task for what blocks \
you. Never mark a task completed when you could not verify it.

Dependencies:
- addBlocks lists tasks that cannot start before this one is completed.
- addBlockedBy lists tasks this one waits for.
A blocked task cannot be set in_progress until its blockers are completed. Use \
dependencies when the order matters for correctness, e.g. a migration before the code that \
reads the new column; do not add them only to record the order you plan to work in.

owner names the agent that works on the task: yourself, or a sub-agent's name when you hand \
the task over. A sub-agent should only update tasks it owns.

metadata is merged into the task's metadata; set a key to null to remove it. Subject, \
description and activeForm replace the old values entirely, so pass the full new text.

Example of a list in the middle of a task:
- [completed] Reproduce the crash with a BOM-prefixed file
- [in_progress] Strip the BOM when opening the file
- [pending] Include the line number in parse errors (blocked by the task above)
- [pending] Add tests for both changes

Keep the list honest: it is what the user reads to know where the work stands.

Common mistakes:
- Marking several tasks completed at the end instead of each one as it is done: the user \
cannot follow the progress.
- Leaving a task in_progress while starting another: only one task is in progress at a time.
- Completing a task whose tests you did not run: keep it in progress until they pass.
- Creating a second task for work that already has one: update the existing task instead.
- Using deleted for a task that was done: mark it completed, so the user sees it happened.
"""

WEB_FETCH_DESCRIPTION = """\
Fetches a URL, converts the page to markdown and answers prompt about it with a small, fast \
model. Read-only. The URL must be fully formed; HTTP is upgraded to HTTPS. When a URL \
redirects to another host, you get the new URL to fetch. Ask focused questions in prompt. \
Pages behind a login cannot be read. For GitHub, prefer the gh command through Bash.
"""

WEB_SEARCH_DESCRIPTION = """\
Searches the web and returns results with titles, links and short extracts. Restrict them \
with allowed_domains or blocked_domains. Cite the pages you used as markdown links, and use \
the current year from the environment when you search for recent releases.
"""

WORKFLOW_DESCRIPTION = (
    """\
Runs a workflow: a script that drives several steps of work — shell commands, file edits, \
sub-agents, checks — in a fixed order, with the results of each step available to the next. \
Use it for procedures the user wants done the same way every time, and for large jobs whose \
steps can be written down in advance.

A workflow is a JavaScript module that exports one async function. The function receives an \
object with the tools it may use and the args you pass:

    export default async function ({ bash, read, edit, agent, log, args }) {
      const status = await bash("git status --porcelain");
      if (status.stdout.trim()) throw new Error("the working tree is not clean");
      const report = await agent({ prompt: `Review ${args.path} for error handling` });
      log(report.summary);
      return { ok: true, findings: report.findings.length };
    }

Pass the script inline as script, or point scriptPath at a file in the project (workflows \
the team shares usually live in .claude/workflows/). name and title identify the run in the \
transcript; description says in a sentence what it does. args is any JSON value and reaches \
the script unchanged.

Each run gets an id (wf_ followed by letters and digits). A run that stopped — because a \
step failed, the user interrupted it, or the session ended — can be continued with \
resumeFromRunId: steps that completed are not repeated, and the script continues from the \
step that did not finish.

Writing a workflow the user can trust:
- Say what the workflow will do before you start it, in two or three sentences, and start \
it only when the user agrees; a workflow runs many steps without asking again.
- Log one line per meaningful step ("Updated requests in packages/api, tests passed"), so \
the user can follow the run without reading every command.
- Return a summary that answers the user's question, not the raw output of the last step.
- After the run, read the summary and the log yourself, check the claims that matter, and \
tell the user what happened in your own words.

Rules for scripts:
- Every step runs with the session's permissions. A step that needs an approval the user \
has not given pauses the workflow and asks; write scripts so that such steps come early.
- Keep steps idempotent where you can, so that resuming is safe.
- Throw an Error with a clear message when a precondition fails; the message is shown to \
the user and the run can be resumed after they fix it.
- Do not print secrets with log; the log is part of the transcript.
- Scripts have no network access of their own; use bash with the commands the sandbox \
allows.
- A script may start sub-agents with agent, several at once with Promise.all; each gets its \
own context and reports back a summary. Give every sub-agent a prompt that stands on its \
own.

Sub-agents started from a workflow follow the same rules as ones you start yourself: they \
cannot see the conversation, they report once, and their reports are claims to check. A \
workflow that starts many of them at once should limit how many run in parallel, e.g. four \
at a time, so that the user's machine and rate limits are not overwhelmed; collect their \
reports as they finish and log one line per report. When an agent fails, record the failure \
and continue with the others unless the workflow cannot be meaningful without it; the \
summary then names what is missing.

When to use a workflow rather than individual tool calls:
- The user asks for a procedure they describe step by step, or names a workflow file.
- The same few steps must be repeated over many items: every package of a monorepo, every \
failing test, every file of a migration.
- The job is long enough that it may be interrupted, and resuming matters.

When not to:
- For one or two commands: call the tools directly.
- For exploratory work where the next step depends on judgement: do it yourself, turn by \
turn.

The script's tools:
- bash(command, { cwd, timeoutMs, background }) runs a shell command with the session's \
sandbox and permissions and resolves to { stdout, stderr, exitCode }. It does not throw for \
a non-zero exit code; check exitCode yourself. With background it resolves at once to a \
handle whose output() and stop() methods read and end the process.
- read(path, { offset, limit }) resolves to the file's text, numbered lines stripped. It \
throws when the file does not exist.
- edit(path, oldString, newString, { replaceAll }) changes a file exactly like the Edit tool, \
and throws when oldString is missing or not unique.
- write(path, content) replaces a file; prefer edit for files that exist.
- agent({ prompt, subagentType, model, isolation }) starts a sub-agent and resolves to its \
report: { summary, findings, changedFiles }. The prompt is all the agent sees.
- log(message) appends a line to the run's log, shown to the user as the run progresses.
- ask(question, options) pauses the run and asks the user; it resolves to the chosen option. \
Use it for decisions a script cannot make, such as which of two failing fixes to keep.
- args is the value passed in the call, unchanged.

What a run reports:
- Each step's tool, arguments, duration and outcome, in order, in the run's log.
- The value the function returns, as JSON; keep it small and meaningful, e.g. counts and \
the paths that changed.
- For a failed run: the step that failed, its error message, and the run id to resume with.

The procedures below are the ones users most often ask to have done the same way each \
time. Write their workflows to follow them, and follow them yourself when a step of a \
workflow needs your judgement.

"""
    + guide(
        "commits",
        "pull_requests",
        "delegation",
        "planning",
        "debugging",
        "examples",
        "sandbox",
        "long_running",
        "output",
        "tooling",
        "secrets",
    )
    + """

Examples of workflows:

<example>
A workflow that updates one dependency per step in every package of a monorepo: for each \
package directory in args.packages, run the package manager's update command for \
args.dependency, run that package's tests, and commit the change with a message naming the \
package and the new version; stop at the first failing test suite and report its output.
</example>

<example>
A workflow that triages failing tests: run the suite once with a machine-readable report, \
start one sub-agent per failing test module with a prompt naming the module, the failure \
output and the instruction not to edit files, then collect their answers into a table of \
module, probable cause and suggested fix.
</example>

<example>
A workflow that checks a pull request before review: fetch the branch, run the formatter in \
check mode, the linter, the type checker and the tests in that order, stopping at the first \
failure; then start two sub-agents in parallel, one reviewing the diff for bugs and one for \
missing tests, each told not to edit files; return their findings merged and sorted by \
severity.
</example>

<example>
A workflow that migrates call sites one module at a time: read the list of modules from \
args, and for each one replace the old API with the new one using edit, run that module's \
tests, and log the result; collect the modules whose tests failed and return them, so the \
user can look at those by hand instead of reading the whole run.
</example>

<example>
A workflow that prepares a release: check that the working tree is clean and the branch is \
up to date, read the commits since the last tag, write the changelog entry with a \
sub-agent, bump the version in the manifest, run the full test suite, and create the commit \
and the tag — but do not push; the user pushes after reading the changelog.
</example>
"""
)

WRITE_DESCRIPTION = """\
Writes a file, replacing it if it exists. Read an existing file first in this conversation. \
Use an absolute path. Prefer editing existing files; create a file only when the task needs \
one.
"""

LIST_MCP_RESOURCES_DESCRIPTION = """\
Lists the resources that the connected MCP servers offer: files, database tables, documents \
and other data a server makes readable by URI. Each entry has the server name, the URI, a \
name and, when the server gives them, a description and a MIME type. Pass server to list \
only one server's resources.
"""

READ_MCP_RESOURCE_DIR_DESCRIPTION = """\
Lists the entries under a directory-like resource URI of an MCP server, such as a folder of \
a file server or a schema of a database server, without reading their contents. Each entry \
has its URI, a name and whether it is itself a directory. Use it to walk a server's \
resources one level at a time; read an entry's content with ReadMcpResourceTool. Both \
server and uri are required; the uri must be one the server listed or an entry of such a \
directory.
"""

READ_MCP_RESOURCE_DESCRIPTION = """\
Reads one resource of an MCP server by its URI and returns its content: text as text, \
binary content as a summary with its MIME type and size. server and uri are required.
"""

TOOL_SEARCH_DESCRIPTION = """\
Finds deferred tools and loads their schemas, so that you can call them in the next turn.

Some tools are not loaded at the start of the session to keep the context small; their \
names are listed in the conversation. A deferred tool cannot be called until it has been \
loaded with this tool: calling it directly fails with an input validation error.

query is either keywords, matched against tool names and descriptions ("jira transition \
issue", "git log"), or "select:" followed by exact tool names separated by commas, to load \
tools whose names you already know ("select:mcp__git__git_log,mcp__git__git_show"). \
max_results limits how many tools a keyword search loads.

The result lists the tools that were loaded. Their schemas are available from your next \
turn on, for the rest of the session. Load what you need for the task at hand, not every \
tool that might be useful later.
"""

MAX_SAFE_INTEGER = 9007199254740991  # zod 4 writes int() bounds as JavaScript's safe range


def zod_schema(properties: dict[str, JSON], required: tuple[str, ...] = ()) -> dict[str, JSON]:
    """An input schema as zod 4's toJSONSchema writes it: `$schema` first, `required` only when
    a property is required, `additionalProperties: false` last."""
    schema: dict[str, JSON] = {"$schema": DRAFT_2020_12, "type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def described(type_: str, description: str, **constraints: JSON) -> dict[str, JSON]:
    """A zod 4 property: `description` first, then `type`, then its constraints."""
    return {"description": description, "type": type_, **constraints}


def defaulted(type_: str, description: str, default: JSON, **constraints: JSON) -> JSON:
    """A zod 4 property with `.default()`: the default sits between description and type."""
    return {"description": description, "default": default, "type": type_, **constraints}


def string_list(description: str) -> dict[str, JSON]:
    return {"description": description, "type": "array", "items": {"type": "string"}}


def string_map(description: str) -> dict[str, JSON]:
    """zod 4's z.record(z.string(), z.unknown())."""
    return {
        "description": description,
        "type": "object",
        "propertyNames": {"type": "string"},
        "additionalProperties": {},
    }


def anthropic_tool(name: str, description: str, input_schema: dict[str, JSON]) -> dict[str, JSON]:
    return {"name": name, "description": description, "input_schema": input_schema}


BASH_COMMAND_FIELD = """\
A short description of what the command does, shown to the user in the transcript instead of \
the raw command. Write it in active voice and keep it to 5-10 words for simple commands: \
"List files in the current directory", "Show uncommitted changes", "Install the project's \
dependencies". For commands that are hard to read at a glance — pipes, redirections, long \
flag lists, inline scripts — add a few words on why you run it: "Count failing tests per \
module from the JSON report". Do not repeat the command itself, do not start with "This \
command", and never put secrets or tokens in the description. The user reads these lines to \
decide whether to approve a command, so make them accurate rather than reassuring.\
"""


def claude_code_builtin_tools() -> dict[str, dict[str, JSON]]:
    """Claude Code's built-in tools by name (the MCP resource tools and ToolSearch included)."""
    tools = [
        anthropic_tool(
            "Agent",
            AGENT_DESCRIPTION,
            zod_schema(
                {
                    "description": described("string", "The task in three to five words"),
                    "prompt": described(
                        "string", "Everything the agent needs to know to do the task"
                    ),
                    "subagent_type": described(
                        "string", "The agent type to use; general-purpose when omitted"
                    ),
                    "model": described(
                        "string",
                        "The model for this agent. Leave it out to use the model the agent "
                        "type names, or the session's model. Pick a smaller model for wide, "
                        "shallow searches and a larger one for tasks that need careful "
                        "reasoning; the choice affects speed and cost, not the tools available.",
                        enum=["sonnet", "opus", "haiku", "fable"],
                    ),
                    "run_in_background": described(
                        "boolean",
                        "Run the agent in the background; you are told when it finishes.",
                    ),
                    "isolation": described(
                        "string",
                        "Where the agent works. worktree gives it its own git worktree on a new "
                        "branch, so its edits cannot collide with the main checkout; remote "
                        "runs it on a remote machine with a fresh clone of the repository.",
                        enum=["worktree", "remote"],
                    ),
                },
                ("description", "prompt"),
            ),
        ),
        anthropic_tool(
            "Bash",
            BASH_DESCRIPTION,
            zod_schema(
                {
                    "command": described("string", "The shell command line to run"),
                    "timeout": described(
                        "number", "Milliseconds before the command is stopped, 600000 at most"
                    ),
                    "description": described("string", BASH_COMMAND_FIELD),
                    "run_in_background": described(
                        "boolean", "Run the command in the background and return at once."
                    ),
                    "dangerouslyDisableSandbox": described(
                        "boolean",
                        "Run the command outside the sandbox. The user is asked to approve it; "
                        "say why.",
                    ),
                },
                ("command",),
            ),
        ),
        anthropic_tool(
            "CronCreate",
            CRON_CREATE_DESCRIPTION,
            zod_schema(
                {
                    "cron": described(
                        "string",
                        "Five-field cron expression in the user's local time zone: minute, "
                        'hour, day of month, month, day of week, e.g. "0 9 * * 1-5".',
                    ),
                    "prompt": described("string", "The prompt to run when the job fires"),
                    "recurring": described(
                        "boolean",
                        "Keep running on every match of the expression until deleted. When "
                        "false (the default) the job runs once at the next match and is then "
                        "deleted. Recurring jobs count towards the project's limit of 20.",
                    ),
                    "durable": described(
                        "boolean",
                        "Store the job in the project settings so that future sessions run it "
                        "too. When false (the default) the job ends with this session. Only set "
                        "it when the user asked for something that outlives the session.",
                    ),
                },
                ("cron", "prompt"),
            ),
        ),
        anthropic_tool(
            "CronDelete",
            CRON_DELETE_DESCRIPTION,
            zod_schema({"id": described("string", "Id of the scheduled job to remove")}, ("id",)),
        ),
        anthropic_tool("CronList", CRON_LIST_DESCRIPTION, zod_schema({})),
        anthropic_tool(
            "Edit",
            EDIT_DESCRIPTION,
            zod_schema(
                {
                    "file_path": described("string", "Absolute path of the file to change"),
                    "old_string": described("string", "Exact text to find in the file"),
                    "new_string": described(
                        "string", "What replaces it; must differ from old_string"
                    ),
                    "replace_all": defaulted(
                        "boolean",
                        "Change every match of old_string, not just one (default false)",
                        False,
                    ),
                },
                ("file_path", "old_string", "new_string"),
            ),
        ),
        anthropic_tool(
            "EnterWorktree",
            ENTER_WORKTREE_DESCRIPTION,
            zod_schema(
                {
                    "name": described(
                        "string",
                        "Name for the new branch and worktree: letters, digits and dashes, e.g. "
                        '"upgrade-django-5". A short suffix is added when the name is taken. '
                        "Made up from the task when omitted.",
                    ),
                    "path": described(
                        "string",
                        "Where to put the worktree, absolute or relative to the repository "
                        "root. Defaults to .claude/worktrees/<name>. An existing worktree at "
                        "this path is reused.",
                    ),
                }
            ),
        ),
        anthropic_tool(
            "ExitWorktree",
            EXIT_WORKTREE_DESCRIPTION,
            zod_schema(
                {
                    "action": described(
                        "string",
                        "keep leaves the worktree in place; remove deletes its directory",
                        enum=["keep", "remove"],
                    ),
                    "discard_changes": described(
                        "boolean",
                        "With remove: delete the worktree even if it has uncommitted changes. "
                        "Only when the user said they can go.",
                    ),
                },
                ("action",),
            ),
        ),
        anthropic_tool(
            "NotebookEdit",
            NOTEBOOK_EDIT_DESCRIPTION,
            zod_schema(
                {
                    "notebook_path": described(
                        "string",
                        "Absolute path of the .ipynb file to change",
                    ),
                    "cell_id": described(
                        "string",
                        "The id of the cell to change. With edit_mode=insert the new cell goes "
                        "after this one, or first when cell_id is omitted.",
                    ),
                    "new_source": described("string", "Source text the cell gets"),
                    "cell_type": described(
                        "string",
                        "code or markdown. Defaults to the current cell's type; required with "
                        "edit_mode=insert.",
                        enum=["code", "markdown"],
                    ),
                    "edit_mode": described(
                        "string",
                        "replace (the default), insert or delete",
                        enum=["replace", "insert", "delete"],
                    ),
                },
                ("notebook_path", "new_source"),
            ),
        ),
        anthropic_tool(
            "Read",
            READ_DESCRIPTION,
            zod_schema(
                {
                    "file_path": described("string", "Absolute path of the file"),
                    "offset": described(
                        "integer",
                        "The line to start reading at, counting from 1. Only for files too "
                        "large to read at once.",
                        minimum=0,
                        maximum=MAX_SAFE_INTEGER,
                    ),
                    "limit": described(
                        "integer",
                        "How many lines to read. Only for files too large to read at once.",
                        exclusiveMinimum=0,
                        maximum=MAX_SAFE_INTEGER,
                    ),
                    "pages": described(
                        "string",
                        'For PDF files: the pages to read, e.g. "1-5" or "3,7,12". Long PDFs '
                        "must be read in ranges.",
                    ),
                },
                ("file_path",),
            ),
        ),
        anthropic_tool(
            "ReportFindings",
            REPORT_FINDINGS_DESCRIPTION,
            zod_schema(
                {
                    "level": described(
                        "string",
                        "The review depth the user asked for",
                        enum=["low", "medium", "high", "xhigh", "max"],
                    ),
                    "findings": {
                        "description": "The findings, most serious first (at most 32 of them)",
                        "maxItems": 32,
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "file": described(
                                    "string", "Path of the file, relative to the repository root"
                                ),
                                "line": described(
                                    "integer",
                                    "Line number, when the finding has one",
                                    minimum=-MAX_SAFE_INTEGER,
                                    maximum=MAX_SAFE_INTEGER,
                                ),
                                "summary": described("string", "What is wrong, in one sentence"),
                                "failure_scenario": described(
                                    "string", "A concrete case in which it fails"
                                ),
                                "verdict": described(
                                    "string",
                                    "CONFIRMED if reproduced or traced end to end, else PLAUSIBLE",
                                    enum=["CONFIRMED", "PLAUSIBLE"],
                                ),
                                "outcome": described(
                                    "string",
                                    "What you did about it, if anything: fixed, skipped or "
                                    "no_change_needed",
                                    enum=["fixed", "skipped", "no_change_needed"],
                                ),
                            },
                            "required": ["file", "summary", "failure_scenario"],
                            "additionalProperties": False,
                        },
                    },
                },
                ("findings",),
            ),
        ),
        anthropic_tool(
            "ScheduleWakeup",
            SCHEDULE_WAKEUP_DESCRIPTION,
            zod_schema(
                {
                    "delaySeconds": described(
                        "number", "How long to wait, from 10 seconds to 86400 (24 hours)"
                    ),
                    "reason": described(
                        "string",
                        'Shown to the user while the session waits, e.g. "Waiting for the '
                        'staging deploy to finish"',
                    ),
                    "prompt": described(
                        "string",
                        "Delivered to you when the time is up, as if the user had sent it. Say "
                        "what to check and what to do with each possible result: the details of "
                        "this turn may have been compacted away by then. Name commands, URLs, "
                        "run ids and pull request numbers explicitly rather than referring to "
                        '"it" or "the above".',
                    ),
                },
                ("delaySeconds", "reason", "prompt"),
            ),
        ),
        anthropic_tool(
            "SendMessage",
            SEND_MESSAGE_DESCRIPTION,
            zod_schema(
                {
                    "to": described("string", "The receiving agent's name"),
                    "summary": described(
                        "string",
                        "A short line shown to the user in the transcript (at most 200 chars)",
                        maxLength=200,
                    ),
                    "message": described("string", "The message, as plain text"),
                },
                ("to", "message"),
            ),
        ),
        anthropic_tool(
            "Skill",
            SKILL_DESCRIPTION,
            zod_schema(
                {
                    "skill": described(
                        "string", 'The skill\'s name exactly as listed, e.g. "release-notes"'
                    ),
                    "args": described("string", "Optional arguments for the skill"),
                },
                ("skill",),
            ),
        ),
        anthropic_tool(
            "TaskCreate",
            TASK_CREATE_DESCRIPTION,
            zod_schema(
                {
                    "subject": described("string", "Imperative one-line subject"),
                    "description": described("string", "What done means"),
                    "activeForm": described(
                        "string",
                        'Continuous form shown while the task runs, e.g. "Running the tests"',
                    ),
                    "metadata": string_map("Key/value pairs for your own bookkeeping"),
                },
                ("subject", "description"),
            ),
        ),
        anthropic_tool(
            "TaskGet",
            TASK_GET_DESCRIPTION,
            zod_schema({"taskId": described("string", "The id of the task to read")}, ("taskId",)),
        ),
        anthropic_tool("TaskList", TASK_LIST_DESCRIPTION, zod_schema({})),
        anthropic_tool(
            "TaskOutput",
            TASK_OUTPUT_DESCRIPTION,
            zod_schema(
                {
                    "task_id": described("string", "The id of the background task"),
                    "block": defaulted("boolean", "Wait until the task has finished", True),
                    "timeout": defaulted(
                        "number", "Longest wait in ms", 30000, minimum=0, maximum=600000
                    ),
                },
                ("task_id", "block", "timeout"),
            ),
        ),
        anthropic_tool(
            "TaskStop",
            TASK_STOP_DESCRIPTION,
            zod_schema(
                {
                    "task_id": described("string", "The id of the background task to stop"),
                    "shell_id": described("string", "Deprecated spelling of task_id"),
                }
            ),
        ),
        anthropic_tool(
            "TaskUpdate",
            TASK_UPDATE_DESCRIPTION,
            zod_schema(
                {
                    "taskId": described("string", "The id of the task to change"),
                    "subject": described("string", "New imperative subject"),
                    "description": described("string", "New description of done"),
                    "activeForm": described(
                        "string",
                        'Continuous form shown while the task runs, e.g. "Running the tests"',
                    ),
                    "status": {
                        "description": "New status; deleted removes the task",
                        "anyOf": [
                            {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            {"type": "string", "const": "deleted"},
                        ],
                    },
                    "addBlocks": string_list("Ids of tasks that wait for this one"),
                    "addBlockedBy": string_list("Ids of tasks this one waits for"),
                    "owner": described("string", "Agent that works on it"),
                    "metadata": string_map(
                        "Merged into the task's metadata; a key set to null is removed"
                    ),
                },
                ("taskId",),
            ),
        ),
        anthropic_tool(
            "WebFetch",
            WEB_FETCH_DESCRIPTION,
            zod_schema(
                {
                    "url": described("string", "Address of the page to fetch", format="uri"),
                    "prompt": described("string", "What to find out from the fetched page"),
                },
                ("url", "prompt"),
            ),
        ),
        anthropic_tool(
            "WebSearch",
            WEB_SEARCH_DESCRIPTION,
            zod_schema(
                {
                    "query": described("string", "What to search the web for", minLength=2),
                    "allowed_domains": string_list("Keep only results from these sites"),
                    "blocked_domains": string_list("Drop results from these sites"),
                },
                ("query",),
            ),
        ),
        anthropic_tool(
            "Workflow",
            WORKFLOW_DESCRIPTION,
            zod_schema(
                {
                    "script": described(
                        "string",
                        "The workflow's source: a JavaScript module whose default export is an "
                        "async function taking { bash, read, edit, agent, log, args }. Give "
                        "either script or scriptPath.",
                        maxLength=524288,
                    ),
                    "name": described(
                        "string",
                        "A short identifier for the run, letters, digits and dashes, e.g. "
                        '"bump-deps"',
                    ),
                    "description": described(
                        "string", "One sentence on what the workflow does, for the user"
                    ),
                    "title": described(
                        "string", "Title of the run as shown in the transcript's header"
                    ),
                    "args": {
                        "description": "Any JSON value, passed to the script unchanged as args. "
                        "Use it for the inputs that differ between runs of the same workflow — "
                        "package lists, paths, version numbers — so the script itself can stay "
                        "the same and be reviewed once. Keep it small; large inputs belong in "
                        "files the script reads."
                    },
                    "scriptPath": described(
                        "string",
                        "Path of a workflow file in the project, absolute or relative to the "
                        "repository root, e.g. .claude/workflows/release.js. Use it for "
                        "workflows the team keeps in the repository, so that every run uses the "
                        "reviewed version; the file is read when the run starts, and changes "
                        "made to it during the run have no effect.",
                    ),
                    "resumeFromRunId": described(
                        "string",
                        "The id of a stopped run to continue (wf_ followed by at least six "
                        "letters, digits or dashes). Steps that completed are not repeated; the "
                        "script is taken from the stopped run, so leave script and scriptPath "
                        "out.",
                        pattern="^wf_[a-z0-9-]{6,}$",
                    ),
                }
            ),
        ),
        anthropic_tool(
            "Write",
            WRITE_DESCRIPTION,
            zod_schema(
                {
                    "file_path": described(
                        "string",
                        "Where to write, as an absolute path; relative paths are refused",
                    ),
                    "content": described("string", "The file's complete new content"),
                },
                ("file_path", "content"),
            ),
        ),
        anthropic_tool(
            "ListMcpResourcesTool",
            LIST_MCP_RESOURCES_DESCRIPTION,
            zod_schema(
                {"server": described("string", "Only list this server's resources (optional)")}
            ),
        ),
        anthropic_tool(
            "ReadMcpResourceDirTool",
            READ_MCP_RESOURCE_DIR_DESCRIPTION,
            zod_schema(
                {
                    "server": described("string", "The server's name"),
                    "uri": described("string", "The directory resource's URI"),
                },
                ("server", "uri"),
            ),
        ),
        anthropic_tool(
            "ReadMcpResourceTool",
            READ_MCP_RESOURCE_DESCRIPTION,
            zod_schema(
                {
                    "server": described("string", "The server's name"),
                    "uri": described("string", "The resource's URI"),
                },
                ("server", "uri"),
            ),
        ),
        anthropic_tool(
            "ToolSearch",
            TOOL_SEARCH_DESCRIPTION,
            zod_schema(
                {
                    "query": described(
                        "string",
                        'Keywords to match against tool names and descriptions, or "select:" '
                        "and exact names, comma-separated",
                    ),
                    "max_results": defaulted("number", "Most tools to load for a keyword query", 5),
                },
                ("query", "max_results"),
            ),
        ),
    ]
    return {tool["name"]: tool for tool in tools}


BUILTIN = claude_code_builtin_tools()
# `claude -p` with no MCP server; servers with resources add the three MCP resource tools.
CLAUDE_CODE_TOOLS = sorted(set(BUILTIN) - {"ToolSearch"} - {n for n in BUILTIN if "Mcp" in n})
CLAUDE_CODE_MCP_TOOLS = sorted(set(BUILTIN) - {"ToolSearch"})
# With tool search on, these stay loaded; every other tool is deferred and named in a message.
CLAUDE_CODE_LOADED = ["Agent", "Bash", "Edit", "Read", "ReportFindings", "Skill", "ToolSearch"]
CLAUDE_CODE_LOADED += ["Workflow", "Write"]


# Schema generators: pydantic v2 `model_json_schema()`, as FastMCP and other Python servers use it.


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


def untitled(schema: JSON) -> JSON:
    """A pydantic schema without its `title`s, as servers that strip them send it."""
    if isinstance(schema, list):
        return [untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, JSON] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: untitled(sub) for name, sub in value.items()}
        elif key in ("default", "enum", "const", "examples"):
            out[key] = value
        else:
            out[key] = untitled(value)
    return out


# MCP servers, each tools/list answer as its SDK writes it. Claude Code forwards a server's
# inputSchema as input_schema with `type`, `properties` and `required` moved to the front,
# names the tool mcp__<server>__<tool> and sorts those names after its built-in tools. The
# TypeScript servers here use zod 3 with zod-to-json-schema (draft-07 `$schema` last); the
# Python ones pydantic, with or without `title`s; one writes its schemas by hand.


def zod3(type_: str, description: str | None = None, **extra: JSON) -> dict[str, JSON]:
    """A zod-to-json-schema property: `type`, its constraints and default, `description` last."""
    out: dict[str, JSON] = {"type": type_, **extra}
    if description is not None:
        out["description"] = description
    return out


def zod3_object(properties: dict[str, JSON], required: tuple[str, ...] = ()) -> dict[str, JSON]:
    schema: dict[str, JSON] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def zod3_schema(properties: dict[str, JSON], required: tuple[str, ...] = ()) -> dict[str, JSON]:
    return {**zod3_object(properties, required), "$schema": DRAFT_07}


def plain_schema(properties: dict[str, JSON], required: tuple[str, ...] = ()) -> dict[str, JSON]:
    """A schema written by hand in the server's source: no `$schema`, no titles."""
    schema: dict[str, JSON] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def plain(type_: str, description: str, **extra: JSON) -> dict[str, JSON]:
    return {"type": type_, "description": description, **extra}


def forwarded(server: str, name: str, description: str, input_schema: JSON) -> dict[str, JSON]:
    """An MCP tool as Claude Code sends it on: `type`, `properties` and `required` first, the
    server's other keys after them in the server's order."""
    head = ("type", "properties", "required")
    schema = {"type": "object"}
    schema.update({key: input_schema[key] for key in head[1:] if key in input_schema})
    schema.update({key: value for key, value in input_schema.items() if key not in head})
    return anthropic_tool(f"mcp__{server}__{name}", description, schema)


PATH = zod3("string")


def files_server() -> list[tuple[str, str, JSON]]:
    """A filesystem server (TypeScript SDK, zod): every schema carries draft-07 `$schema`."""
    allowed = (
        " Paths must lie under one of the server's allowed roots; others are refused and "
        "the refusal names the roots."
    )
    head_tail = {
        "path": PATH,
        "tail": zod3("number", "Only this many lines from the end"),
        "head": zod3("number", "Only this many lines from the start"),
    }
    return [
        (
            "read_file",
            "Returns a text file's content. Kept for older clients; read_text_file takes the "
            "same arguments and is the one to use." + allowed,
            zod3_schema(head_tail, ("path",)),
        ),
        (
            "read_text_file",
            "Returns the content of one text file, decoded from its detected encoding. A file "
            "that cannot be decoded produces an error that says why. Give head to get only "
            "the opening N lines or tail for the closing N lines, never both; without them "
            "the whole file comes back." + allowed,
            zod3_schema(head_tail, ("path",)),
        ),
        (
            "read_media_file",
            "Returns an image or a sound file as base64 data with its MIME type, for clients "
            "that can display or play it." + allowed,
            zod3_schema({"path": PATH}, ("path",)),
        ),
        (
            "read_multiple_files",
            "Returns the content of several files in one call, each headed by its path; "
            "cheaper than one call per file when you compare them. A file that fails is "
            "reported in its place and the rest still come back." + allowed,
            zod3_schema(
                {
                    "paths": zod3(
                        "array",
                        "The files wanted, each inside an allowed directory.",
                        items={"type": "string"},
                        minItems=1,
                    )
                },
                ("paths",),
            ),
        ),
        (
            "write_file",
            "Writes content to a path as UTF-8, creating the file or replacing whatever was "
            "there without asking, so check the path first." + allowed,
            zod3_schema({"path": PATH, "content": zod3("string")}, ("path", "content")),
        ),
        (
            "edit_file",
            "Changes a text file by replacing runs of lines: each edit names the lines as they "
            "are now and what should stand there instead; indentation may differ slightly. "
            "Answers with a unified diff. With dryRun the diff is computed and nothing is "
            "written." + allowed,
            zod3_schema(
                {
                    "path": PATH,
                    "edits": zod3(
                        "array",
                        items=zod3_object(
                            {
                                "oldText": zod3("string", "The lines as they are now, verbatim"),
                                "newText": zod3("string", "The lines to put there"),
                            },
                            ("oldText", "newText"),
                        ),
                    ),
                    "dryRun": zod3(
                        "boolean", "Only show the diff; leave the file as it is", default=False
                    ),
                },
                ("path", "edits"),
            ),
        ),
        (
            "create_directory",
            "Makes a directory and any missing parents; a directory that is already there is "
            "fine, so calling it twice does no harm." + allowed,
            zod3_schema({"path": PATH}, ("path",)),
        ),
        (
            "list_directory",
            "Names what a directory holds, one entry a line, each marked [FILE] or [DIR]. Not "
            "recursive: directory_tree walks the whole tree." + allowed,
            zod3_schema({"path": PATH}, ("path",)),
        ),
        (
            "list_directory_with_sizes",
            "Like list_directory, with each file's size and a total line at the end; order by "
            "size to see where the space goes." + allowed,
            zod3_schema(
                {
                    "path": PATH,
                    "sortBy": zod3(
                        "string",
                        "Order of the entries",
                        enum=["name", "size"],
                        default="name",
                    ),
                },
                ("path",),
            ),
        ),
        (
            "directory_tree",
            "Walks a directory and answers with a JSON tree: name and type for every entry, "
            "children for directories, indented by two spaces. Leave out dependency and build "
            "folders with excludePatterns, or the tree gets large." + allowed,
            zod3_schema(
                {
                    "path": PATH,
                    "excludePatterns": zod3("array", items={"type": "string"}, default=[]),
                },
                ("path",),
            ),
        ),
        (
            "move_file",
            "Renames a file or directory, or moves it elsewhere. Refuses when something "
            "already exists at the destination." + allowed,
            zod3_schema({"source": PATH, "destination": PATH}, ("source", "destination")),
        ),
        (
            "search_files",
            "Finds entries below a directory whose names match a glob ('*.ts' there, '**/*.ts' "
            "at any depth) and answers with their full paths, for when you do not know where "
            "something lives." + allowed,
            zod3_schema(
                {
                    "path": PATH,
                    "pattern": zod3("string"),
                    "excludePatterns": zod3("array", items={"type": "string"}, default=[]),
                },
                ("path", "pattern"),
            ),
        ),
        (
            "get_file_info",
            "Reports size, timestamps, type and permission bits of a path without opening it."
            + allowed,
            zod3_schema({"path": PATH}, ("path",)),
        ),
        (
            "list_allowed_directories",
            "Names the directory roots this server was given. Everything below them is "
            "reachable with the other tools; nothing else is.",
            zod3_schema({}),
        ),
    ]


ENTITY_NAMES = zod3("array", "Entity names", items={"type": "string"})
RELATION = zod3_object(
    {
        "from": zod3("string", "Entity the link leaves"),
        "to": zod3("string", "Entity the link reaches"),
        "relationType": zod3("string", "Verb naming the link"),
    },
    ("from", "to", "relationType"),
)


def memory_server() -> list[tuple[str, str, JSON]]:
    """A knowledge-graph memory server (TypeScript SDK, zod)."""
    graph = " The graph lives in one JSON Lines file and survives restarts of the server."
    return [
        (
            "create_entities",
            "Adds entities to the graph. Each has a name no other entity has, a kind (person, "
            "service, project...) and observations, short facts about it. A name already in "
            "the graph is left alone." + graph,
            zod3_schema(
                {
                    "entities": zod3(
                        "array",
                        items=zod3_object(
                            {
                                "name": zod3("string", "Unique name"),
                                "entityType": zod3("string", "Kind of thing it is"),
                                "observations": zod3(
                                    "array",
                                    "Short facts, a sentence each",
                                    items={"type": "string"},
                                ),
                            },
                            ("name", "entityType", "observations"),
                        ),
                    )
                },
                ("entities",),
            ),
        ),
        (
            "create_relations",
            "Links entities with directed relations phrased as verbs, e.g. 'ledger-api "
            "depends_on postgres'. A link that exists already is not added twice." + graph,
            zod3_schema({"relations": zod3("array", items=RELATION)}, ("relations",)),
        ),
        (
            "add_observations",
            "Appends facts to entities that exist and answers with what was new for each; an "
            "unknown entity is an error." + graph,
            zod3_schema(
                {
                    "observations": zod3(
                        "array",
                        items=zod3_object(
                            {
                                "entityName": zod3("string", "Entity to extend"),
                                "contents": zod3(
                                    "array", "Facts to append", items={"type": "string"}
                                ),
                            },
                            ("entityName", "contents"),
                        ),
                    )
                },
                ("observations",),
            ),
        ),
        (
            "delete_entities",
            "Removes entities together with all links touching them; unknown names are "
            "skipped quietly." + graph,
            zod3_schema(
                {"entityNames": zod3("array", "Entities to remove", items={"type": "string"})},
                ("entityNames",),
            ),
        ),
        (
            "delete_observations",
            "Removes the listed facts from entities; facts that are not there are skipped." + graph,
            zod3_schema(
                {
                    "deletions": zod3(
                        "array",
                        items=zod3_object(
                            {
                                "entityName": zod3("string", "Entity to prune"),
                                "observations": zod3(
                                    "array", "Facts to remove", items={"type": "string"}
                                ),
                            },
                            ("entityName", "observations"),
                        ),
                    )
                },
                ("deletions",),
            ),
        ),
        (
            "delete_relations",
            "Removes links, each identified by both ends and its verb." + graph,
            zod3_schema(
                {"relations": zod3("array", "Links to remove", items=RELATION)},
                ("relations",),
            ),
        ),
        (
            "read_graph",
            "Dumps the entire graph, entities with their facts and all links. That can be a "
            "lot; search_nodes is the better start when you know what you want.",
            zod3_schema({}),
        ),
        (
            "search_nodes",
            "Finds entities whose name, kind or facts contain the text, ignoring case, and "
            "answers with them and the links among them.",
            zod3_schema(
                {"query": zod3("string", "Text to look for")},
                ("query",),
            ),
        ),
        (
            "open_nodes",
            "Fetches the named entities with their facts and the links among them; unknown "
            "names are simply absent from the answer.",
            zod3_schema({"names": ENTITY_NAMES}, ("names",)),
        ),
    ]


def demo_server() -> list[tuple[str, str, JSON]]:
    """A test server that exercises every MCP feature (TypeScript SDK, zod)."""
    return [
        (
            "echo",
            "Answers with the text it was given; a quick check that the server responds.",
            zod3_schema({"message": zod3("string", "Text to send back")}, ("message",)),
        ),
        (
            "add",
            "Answers with a + b, as text.",
            zod3_schema(
                {"a": zod3("number", "Left operand"), "b": zod3("number", "Right operand")},
                ("a", "b"),
            ),
        ),
        (
            "long_running_operation",
            "Takes its time on purpose and reports progress after each step, to try out "
            "progress notifications.",
            zod3_schema(
                {
                    "duration": zod3("number", "Seconds the whole run should take", default=10),
                    "steps": zod3("number", "How many progress reports to send", default=5),
                }
            ),
        ),
        (
            "print_env",
            "Lists the environment the server process sees, for checking a client's "
            "server configuration.",
            zod3_schema({}),
        ),
        (
            "sample_llm",
            "Sends a prompt back to the client's model through sampling and answers with "
            "the model's reply.",
            zod3_schema(
                {
                    "prompt": zod3("string", "Prompt for the client's model"),
                    "maxTokens": zod3("number", "Longest reply, in tokens", default=100),
                },
                ("prompt",),
            ),
        ),
        (
            "get_tiny_image",
            "Answers with a tiny PNG between two text blocks, to try out image content.",
            zod3_schema({}),
        ),
        (
            "annotated_message",
            "Answers with content carrying priority and audience annotations, so a client "
            "can show how it treats them.",
            zod3_schema(
                {
                    "messageType": zod3(
                        "string",
                        "Which kind of annotated answer to produce",
                        enum=["error", "success", "debug"],
                    ),
                    "includeImage": zod3(
                        "boolean", "Add an annotated image as well", default=False
                    ),
                },
                ("messageType",),
            ),
        ),
        (
            "get_resource_reference",
            "Answers with one of the server's resources embedded in the result.",
            zod3_schema(
                {"resourceId": zod3("number", "Which resource, 1 to 100", minimum=1, maximum=100)},
                ("resourceId",),
            ),
        ),
        (
            "get_resource_links",
            "Answers with links to some of the server's resources, not their content.",
            zod3_schema(
                {
                    "count": zod3(
                        "number",
                        "How many links, 1 to 10",
                        minimum=1,
                        maximum=10,
                        default=3,
                    )
                }
            ),
        ),
        (
            "structured_content",
            "Answers with an invented weather report twice: as structured content matching "
            "the declared output schema, and as text.",
            zod3_schema(
                {"location": zod3("string", "Place to report on", minLength=1)}, ("location",)
            ),
        ),
        (
            "start_elicitation",
            "Asks the user a few questions through elicitation and answers with their "
            "replies, or with the fact that they declined.",
            zod3_schema({}),
        ),
        (
            "zip_resources",
            "Packs the given files into one zip and answers with a link to the archive.",
            zod3_schema(
                {
                    "files": zod3(
                        "object",
                        "Name in the archive -> where to download the file from",
                        additionalProperties={"type": "string", "format": "uri"},
                    )
                },
                ("files",),
            ),
        ),
        (
            "toggle_logging",
            "Switches a stream of log messages at random levels on or off.",
            zod3_schema({}),
        ),
        (
            "list_roots",
            "Answers with the roots the client shared with this server.",
            zod3_schema({}),
        ),
        (
            "trigger_notification",
            "Emits an update notification for a resource, to try out subscriptions.",
            zod3_schema({"uri": zod3("string", "Resource that changed")}, ("uri",)),
        ),
    ]


THINKING_DESCRIPTION = """\
Lets you reason through a hard problem in numbered steps that you write one call at a time. \
Each step may extend the previous ones, correct one of them, or start an alternative line of \
reasoning, so the record shows how you got to an answer and where you changed your mind.

Reach for it when:
- a problem only becomes clear once it is cut into parts;
- a plan will probably need changes once you learn more;
- you suspect an early assumption may be wrong and want to be able to go back to it;
- the scope is unknown at the start and may grow;
- you have to keep several facts in view over many steps;
- there is a lot of noise and you need to keep track of what matters.

How to use it:
- Start with a guess of how many steps you need in totalThoughts, and change the guess \
whenever you learn more; thoughtNumber may go past it.
- To correct an earlier step, set isRevision and name it in revisesThought.
- To try an alternative, set branchFromThought to the step you start from and give the \
branch a name in branchId.
- If you reach what looked like the last step and find that more is needed, set \
needsMoreThoughts and keep going.
- Steps do not have to be certain. Say when you are unsure, state a hypothesis, then test it \
against what the earlier steps established, and repeat until it holds.
- Keep nextThoughtNeeded true until the reasoning is finished; set it to false only in the \
step that holds your final, checked answer.

What to write in a step: one piece of analysis, a correction, a question about a decision \
made earlier, the observation that something is missing, a change of approach, a hypothesis \
or the check of one. Keep each step to the point; the sequence, not a single step, carries \
the argument.

Finish with one answer that you have checked, not a list of possibilities."""


def thinking_server() -> list[tuple[str, str, JSON]]:
    positive = {"type": "integer", "minimum": 1}
    return [
        (
            "sequentialthinking",
            THINKING_DESCRIPTION,
            zod3_schema(
                {
                    "thought": zod3("string", "This step's reasoning"),
                    "nextThoughtNeeded": zod3("boolean", "True while more steps should follow"),
                    "thoughtNumber": {**positive, "description": "Position of this step"},
                    "totalThoughts": {
                        **positive,
                        "description": "Current guess of the number of steps",
                    },
                    "isRevision": zod3("boolean", "This step corrects an earlier one"),
                    "revisesThought": {
                        **positive,
                        "description": "Number of the step being corrected",
                    },
                    "branchFromThought": {
                        **positive,
                        "description": "Step this branch starts from",
                    },
                    "branchId": zod3("string", "Name of the branch"),
                    "needsMoreThoughts": zod3(
                        "boolean", "Reached the end but more steps are needed"
                    ),
                },
                ("thought", "nextThoughtNeeded", "thoughtNumber", "totalThoughts"),
            ),
        )
    ]


REPO_PATH = field("Repo Path", STR)


def git_server() -> list[tuple[str, str, JSON]]:
    """A git server (Python SDK): each schema is a pydantic model's, `title`s included."""
    context = field("Context Lines", {"default": 3, "type": "integer"})
    return [
        (
            "git_status",
            "Which files are staged, modified or untracked in the repository.",
            model("GitStatus", {"repo_path": REPO_PATH}, ["repo_path"]),
        ),
        (
            "git_diff_unstaged",
            "Diff of the edits in the working tree that are not staged.",
            model(
                "GitDiffUnstaged",
                {"repo_path": REPO_PATH, "context_lines": context},
                ["repo_path"],
            ),
        ),
        (
            "git_diff_staged",
            "Diff of what the next commit would contain.",
            model(
                "GitDiffStaged", {"repo_path": REPO_PATH, "context_lines": context}, ["repo_path"]
            ),
        ),
        (
            "git_diff",
            "Diff between the working tree and a branch, tag or commit.",
            model(
                "GitDiff",
                {"repo_path": REPO_PATH, "target": field("Target", STR), "context_lines": context},
                ["repo_path", "target"],
            ),
        ),
        (
            "git_commit",
            "Makes a commit of the staged changes with this message.",
            model(
                "GitCommit",
                {"repo_path": REPO_PATH, "message": field("Message", STR)},
                ["repo_path", "message"],
            ),
        ),
        (
            "git_add",
            "Stages the given files for the next commit.",
            model(
                "GitAdd",
                {"repo_path": REPO_PATH, "files": field("Files", {"items": STR, "type": "array"})},
                ["repo_path", "files"],
            ),
        ),
        (
            "git_reset",
            "Unstages everything; files on disk keep their edits.",
            model("GitReset", {"repo_path": REPO_PATH}, ["repo_path"]),
        ),
        (
            "git_log",
            "Recent commits, newest first, optionally between two points in time.",
            model(
                "GitLog",
                {
                    "repo_path": REPO_PATH,
                    "max_count": field("Max Count", {"default": 10, "type": "integer"}),
                    "start_timestamp": optional(
                        "Start Timestamp",
                        STR,
                        "Earliest commit time to include. Anything git understands works: "
                        "'2024-01-15T14:30:25', '2024-01-15', 'Jan 15 2024', and relative "
                        "forms such as 'yesterday' or '2 weeks ago'",
                    ),
                    "end_timestamp": optional(
                        "End Timestamp",
                        STR,
                        "Latest commit time to include, written like start_timestamp",
                    ),
                },
                ["repo_path"],
            ),
        ),
        (
            "git_create_branch",
            "Makes a branch at HEAD, or at base_branch when given.",
            model(
                "GitCreateBranch",
                {
                    "repo_path": REPO_PATH,
                    "branch_name": field("Branch Name", STR),
                    "base_branch": optional("Base Branch", STR),
                },
                ["repo_path", "branch_name"],
            ),
        ),
        (
            "git_checkout",
            "Checks out an existing branch.",
            model(
                "GitCheckout",
                {"repo_path": REPO_PATH, "branch_name": field("Branch Name", STR)},
                ["repo_path", "branch_name"],
            ),
        ),
        (
            "git_show",
            "Author, date, message and diff of one revision.",
            model(
                "GitShow",
                {"repo_path": REPO_PATH, "revision": field("Revision", STR)},
                ["repo_path", "revision"],
            ),
        ),
        (
            "git_init",
            "Creates an empty repository in a directory, which is made if it does not exist.",
            model("GitInit", {"repo_path": REPO_PATH}, ["repo_path"]),
        ),
        (
            "git_branch",
            "Branch names, local, remote or both, optionally filtered by whether they "
            "include a given commit.",
            model(
                "GitBranch",
                {
                    "repo_path": field("Repo Path", STR, "Where the repository is."),
                    "branch_type": field(
                        "Branch Type",
                        STR,
                        "'local', 'remote' or 'all'.",
                    ),
                    "contains": optional(
                        "Contains",
                        STR,
                        "Only branches that include this commit. Leave it out unless the "
                        "user named a commit",
                    ),
                    "not_contains": optional(
                        "Not Contains",
                        STR,
                        "Only branches that do not include this commit. Leave it out unless "
                        "the user named a commit",
                    ),
                },
                ["repo_path", "branch_type"],
            ),
        ),
    ]


def fetch_server() -> list[tuple[str, str, JSON]]:
    """A web fetch server (Python SDK, pydantic model with `title`s and a model description)."""
    return [
        (
            "fetch",
            "Downloads a web page and hands it back, turned into markdown unless raw is set.\n\n"
            "With this tool you can read current pages on the web, so you can answer with "
            "information that is newer than what you learned in training; tell the user when "
            "you did.\n\nAnswers longer than max_length characters are cut; ask again with "
            "start_index where the last answer ended to read on. Pages whose robots.txt "
            "forbids automated clients are refused.",
            model(
                "Fetch",
                {
                    "url": field(
                        "Url",
                        {"format": "uri", "minLength": 1, "type": "string"},
                        "Address of the page",
                    ),
                    "max_length": field(
                        "Max Length",
                        {
                            "default": 5000,
                            "exclusiveMaximum": 1000000,
                            "exclusiveMinimum": 0,
                            "type": "integer",
                        },
                        "Longest answer, in characters.",
                    ),
                    "start_index": field(
                        "Start Index",
                        {"default": 0, "minimum": 0, "type": "integer"},
                        "Where in the page to start the answer, for reading on after a "
                        "cut-off answer.",
                    ),
                    "raw": field(
                        "Raw",
                        {"default": False, "type": "boolean"},
                        "Hand back the page's HTML as it came, not markdown.",
                    ),
                },
                ["url"],
                description="What to download and how much of it.",
            ),
        )
    ]


def time_server() -> list[tuple[str, str, JSON]]:
    """A time server (FastMCP 2): models named `<function>Arguments`, titles kept."""
    zone = "Zone from the tz database, e.g. 'Asia/Tokyo' or 'America/Chicago'"
    fields: dict[str, tuple[JSON, str]] = {
        "timezone": (STR, zone + "; the user's local zone, Europe/Berlin, when they name none."),
        "source_timezone": (STR, "From: " + zone + "; Europe/Berlin when the user names none."),
        "time": (STR, "Wall-clock time as HH:MM, 24-hour"),
        "target_timezone": (STR, "To: " + zone + "; Europe/Berlin when the user names none."),
    }
    tools = [
        (
            "get_current_time",
            "The time now in a zone, with its offset from UTC and whether summer time applies.",
            ["timezone"],
        ),
        (
            "convert_time",
            "Translates a wall-clock time from one zone to another and says how many hours "
            "apart they are.",
            ["source_timezone", "time", "target_timezone"],
        ),
    ]
    return [(name, text, fastmcp_titled(name, fields, names)) for name, text, names in tools]


def sheets_server() -> list[tuple[str, str, JSON]]:
    """A spreadsheet server (TypeScript SDK) whose schemas are written by hand: no `$schema`."""
    book = plain("string", "Absolute path of the .xlsx workbook")
    sheet = plain("string", "Name of the worksheet")
    cells = plain("string", "Cell range in A1 notation, e.g. 'A1:D20'; a single cell is 'B7'")
    rows = plain("integer", "1-based row number")
    cols = plain("string", "Column letter, e.g. 'C'")
    count = plain("integer", "How many rows or columns", minimum=1)
    base = {"filepath": book, "sheet_name": sheet}
    tools: list[tuple[str, str, dict[str, JSON], tuple[str, ...]]] = [
        (
            "open_workbook",
            "Open a workbook and report its sheets, their used ranges and defined "
            "names. Creates an empty workbook when the file does not exist and create is set.",
            {"filepath": book, "create": plain("boolean", "Create the file if it is missing")},
            ("filepath",),
        ),
        (
            "get_workbook_metadata",
            "Report the workbook's properties: author, modification time, "
            "sheet names with their dimensions, tables, named ranges and whether it has macros.",
            {
                "filepath": book,
                "include_ranges": plain("boolean", "Also list each sheet's used range"),
            },
            ("filepath",),
        ),
        (
            "list_sheets",
            "List the worksheets in workbook order, with their visibility and used range.",
            {"filepath": book},
            ("filepath",),
        ),
        (
            "create_sheet",
            "Add a worksheet, at the end or before another sheet.",
            {
                **base,
                "before": plain("string", "Insert before this sheet; at the end when omitted"),
            },
            ("filepath", "sheet_name"),
        ),
        (
            "rename_sheet",
            "Rename a worksheet. Formulas in other sheets that refer to it are updated.",
            {
                "filepath": book,
                "old_name": sheet,
                "new_name": plain("string", "The new name, at most 31 characters"),
            },
            ("filepath", "old_name", "new_name"),
        ),
        (
            "delete_sheet",
            "Delete a worksheet and its content. Formulas that referred to it show "
            "#REF! afterwards.",
            base,
            ("filepath", "sheet_name"),
        ),
        (
            "copy_sheet",
            "Copy a worksheet, with values, formulas and formatting, under a new name.",
            {
                "filepath": book,
                "source_sheet": sheet,
                "target_sheet": plain("string", "Name of the copy"),
            },
            ("filepath", "source_sheet", "target_sheet"),
        ),
        (
            "read_range",
            "Read the values of a range as rows of cells. Formulas are returned as "
            "their last computed values unless formulas is set; empty trailing rows are left out.",
            {
                **base,
                "range": cells,
                "formulas": plain("boolean", "Return formulas instead of values"),
                "preview_only": plain("boolean", "Return only the first 20 rows"),
            },
            ("filepath", "sheet_name", "range"),
        ),
        (
            "write_range",
            "Write rows of values starting at a cell. Strings that start with '=' "
            "are written as formulas. Existing values in the target cells are replaced.",
            {
                **base,
                "start_cell": plain("string", "Top-left cell of the block, e.g. 'A2'"),
                "data": plain(
                    "array",
                    "Rows to write, each an array of cell values",
                    items={"type": "array", "items": {}},
                ),
            },
            ("filepath", "sheet_name", "start_cell", "data"),
        ),
        (
            "append_rows",
            "Append rows after the last used row of a sheet, keeping the formatting "
            "of the row above.",
            {
                **base,
                "data": plain(
                    "array",
                    "Rows to append, each an array of cell values",
                    items={"type": "array", "items": {}},
                ),
            },
            ("filepath", "sheet_name", "data"),
        ),
        (
            "clear_range",
            "Clear the values of a range; formatting stays unless clear_formats is set.",
            {**base, "range": cells, "clear_formats": plain("boolean", "Clear formatting as well")},
            ("filepath", "sheet_name", "range"),
        ),
        (
            "insert_rows",
            "Insert empty rows before a row; rows below move down and formulas are adjusted.",
            {**base, "start_row": rows, "count": count},
            ("filepath", "sheet_name", "start_row"),
        ),
        (
            "delete_rows",
            "Delete rows; rows below move up and formulas are adjusted.",
            {**base, "start_row": rows, "count": count},
            ("filepath", "sheet_name", "start_row"),
        ),
        (
            "insert_columns",
            "Insert empty columns before a column; columns to the right move and "
            "formulas are adjusted.",
            {**base, "start_column": cols, "count": count},
            ("filepath", "sheet_name", "start_column"),
        ),
        (
            "delete_columns",
            "Delete columns; columns to the right move left and formulas are adjusted.",
            {**base, "start_column": cols, "count": count},
            ("filepath", "sheet_name", "start_column"),
        ),
        (
            "format_range",
            "Apply font, fill, border and alignment settings to a range. Only the "
            "settings you pass change.",
            {
                **base,
                "range": cells,
                "bold": plain("boolean", "Bold text"),
                "italic": plain("boolean", "Italic text"),
                "font_size": plain("number", "Font size in points"),
                "font_color": plain("string", "Text colour as hex, e.g. '#1F2937'"),
                "fill_color": plain("string", "Background colour as hex"),
                "border_style": plain(
                    "string",
                    "Border style",
                    enum=["none", "thin", "medium", "thick", "dashed", "double"],
                ),
                "horizontal": plain(
                    "string", "Horizontal alignment", enum=["left", "center", "right", "justify"]
                ),
                "wrap_text": plain("boolean", "Wrap long text inside the cell"),
            },
            ("filepath", "sheet_name", "range"),
        ),
        (
            "set_number_format",
            "Set the number format of a range, e.g. '#,##0.00', '0%' or 'yyyy-mm-dd'.",
            {**base, "range": cells, "format": plain("string", "Number format code")},
            ("filepath", "sheet_name", "range", "format"),
        ),
        (
            "merge_cells",
            "Merge a range into one cell; only the top-left value is kept.",
            {**base, "range": cells},
            ("filepath", "sheet_name", "range"),
        ),
        (
            "unmerge_cells",
            "Split a merged range back into single cells.",
            {**base, "range": cells},
            ("filepath", "sheet_name", "range"),
        ),
        (
            "set_column_width",
            "Set the width of columns in characters, or fit them to their content.",
            {
                **base,
                "columns": plain("string", "Column or span, e.g. 'B' or 'B:E'"),
                "width": plain("number", "Width in characters; omit with autofit"),
                "autofit": plain("boolean", "Fit to the widest value"),
            },
            ("filepath", "sheet_name", "columns"),
        ),
        (
            "freeze_panes",
            "Freeze the rows above and the columns left of a cell, so they stay "
            "visible while scrolling. 'A1' unfreezes.",
            {**base, "cell": plain("string", "First cell that scrolls, e.g. 'B2'")},
            ("filepath", "sheet_name", "cell"),
        ),
        (
            "create_table",
            "Turn a range with a header row into a named table with filter buttons "
            "and banded rows.",
            {
                **base,
                "range": cells,
                "table_name": plain("string", "Name of the table, unique in the workbook"),
                "style": plain("string", "Table style, e.g. 'TableStyleMedium9'"),
            },
            ("filepath", "sheet_name", "range", "table_name"),
        ),
        (
            "sort_range",
            "Sort the rows of a range by one or more columns.",
            {
                **base,
                "range": cells,
                "keys": plain(
                    "array",
                    "Sort keys, first one first",
                    items={
                        "type": "object",
                        "properties": {
                            "column": cols,
                            "descending": plain("boolean", "Largest first"),
                        },
                        "required": ["column"],
                    },
                ),
                "has_header": plain("boolean", "The first row is a header and stays on top"),
            },
            ("filepath", "sheet_name", "range", "keys"),
        ),
        (
            "filter_range",
            "Return the rows of a range whose column matches a condition, without "
            "changing the sheet.",
            {
                **base,
                "range": cells,
                "column": cols,
                "operator": plain(
                    "string",
                    "Comparison",
                    enum=["equals", "not_equals", "contains", "greater_than", "less_than"],
                ),
                "value": plain("string", "Value to compare with"),
            },
            ("filepath", "sheet_name", "range", "column", "operator", "value"),
        ),
        (
            "find_replace",
            "Find text in a sheet, or in every sheet, and optionally replace it. "
            "Returns the cells that matched.",
            {
                "filepath": book,
                "sheet_name": plain("string", "Worksheet to search; all when omitted"),
                "find": plain("string", "Text to look for"),
                "replace": plain("string", "Replacement; only search when omitted"),
                "match_case": plain("boolean", "Match upper and lower case exactly"),
            },
            ("filepath", "find"),
        ),
        (
            "apply_formula",
            "Write a formula into a cell after checking its syntax and the sheets it "
            "refers to. Returns the computed value when it can be evaluated.",
            {
                **base,
                "cell": plain("string", "Target cell, e.g. 'E12'"),
                "formula": plain("string", "Formula starting with '=', e.g. '=SUM(E2:E11)'"),
            },
            ("filepath", "sheet_name", "cell", "formula"),
        ),
        (
            "create_chart",
            "Add a chart of a data range to a sheet.",
            {
                **base,
                "data_range": cells,
                "chart_type": plain(
                    "string",
                    "Kind of chart",
                    enum=["line", "bar", "column", "pie", "scatter", "area"],
                ),
                "target_cell": plain("string", "Cell where the chart's top-left corner goes"),
                "title": plain("string", "Chart title"),
                "x_axis": plain("string", "Label of the x axis"),
                "y_axis": plain("string", "Label of the y axis"),
            },
            ("filepath", "sheet_name", "data_range", "chart_type", "target_cell"),
        ),
        (
            "create_pivot_table",
            "Summarize a data range in a pivot table on a new or existing sheet.",
            {
                **base,
                "data_range": cells,
                "rows": plain("array", "Fields to group rows by", items={"type": "string"}),
                "values": plain("array", "Fields to aggregate", items={"type": "string"}),
                "columns": plain(
                    "array", "Fields to spread across columns", items={"type": "string"}
                ),
                "agg_func": plain(
                    "string", "Aggregation", enum=["sum", "count", "average", "min", "max"]
                ),
                "target_sheet": plain(
                    "string", "Sheet for the pivot table; a new one when omitted"
                ),
            },
            ("filepath", "sheet_name", "data_range", "rows", "values"),
        ),
        (
            "add_conditional_format",
            "Highlight cells of a range that meet a rule, e.g. values above "
            "a threshold or duplicates.",
            {
                **base,
                "range": cells,
                "rule": plain(
                    "string",
                    "Rule",
                    enum=[
                        "greater_than",
                        "less_than",
                        "between",
                        "duplicate",
                        "text_contains",
                        "color_scale",
                    ],
                ),
                "value": plain("string", "Threshold or text for the rule"),
                "fill_color": plain("string", "Highlight colour as hex"),
            },
            ("filepath", "sheet_name", "range", "rule"),
        ),
        (
            "add_data_validation",
            "Restrict what can be entered in a range: a list of choices, a "
            "number range or a date range, with an optional message.",
            {
                **base,
                "range": cells,
                "kind": plain(
                    "string",
                    "Kind of rule",
                    enum=["list", "whole", "decimal", "date", "text_length"],
                ),
                "choices": plain(
                    "array", "Allowed values for kind 'list'", items={"type": "string"}
                ),
                "minimum": plain("number", "Lowest allowed value"),
                "maximum": plain("number", "Highest allowed value"),
                "error_message": plain("string", "Shown when a value is rejected"),
            },
            ("filepath", "sheet_name", "range", "kind"),
        ),
    ]
    note = (
        "\n\nThe workbook is read from and written to disk on every call; close it in other "
        "programs first, or the write fails. Sheet names are case-sensitive. Formulas are "
        "stored as written and computed by the spreadsheet program when the file is next "
        "opened, except where a tool says it evaluates them. Only .xlsx files are supported; "
        "convert .xls and .ods files first."
    )
    return [(name, text + note, plain_schema(props, req)) for name, text, props, req in tools]


def fastmcp_docstring(summary: str, args: dict[str, str], returns: str, raises: str = "") -> str:
    """A tool description as FastMCP takes it from a Google-style docstring."""
    lines = [summary, "", "Args:"]
    lines += [f"    {name}: {text}" for name, text in args.items()]
    lines += ["", "Returns:", f"    {returns}"]
    if raises:
        lines += ["", "Raises:", f"    {raises}"]
    return "\n".join(lines)


def fastmcp_untitled(fields: dict[str, tuple[JSON, str]], names: list[str]) -> JSON:
    """The schema of a FastMCP tool with these parameters, titles stripped; a parameter with a
    `default` is optional."""
    properties = {name: {**fields[name][0], "description": fields[name][1]} for name in names}
    required = [name for name in names if "default" not in fields[name][0]]
    out: dict[str, JSON] = {"properties": properties}
    if required:
        out["required"] = required
    out["type"] = "object"
    return pydantic_order(out)


def nullable(schema: JSON) -> JSON:
    return {"anyOf": [schema, {"type": "null"}], "default": None}


def bounded(default: int, low: int, high: int) -> JSON:
    return {"default": default, "maximum": high, "minimum": low, "type": "integer"}


OBJECT = {"additionalProperties": True, "type": "object"}
STRINGS = {"items": {"type": "string"}, "type": "array"}


def fastmcp_titled(name: str, fields: dict[str, tuple[JSON, str]], names: list[str]) -> JSON:
    """The schema of a FastMCP 2 tool: a model named `<function>Arguments`, each parameter
    titled after its name."""
    properties = {n: field(n.replace("_", " ").title(), fields[n][0], fields[n][1]) for n in names}
    required = [n for n in names if "default" not in fields[n][0]]
    return model(f"{name}Arguments", properties, required)


def docs_server() -> list[tuple[str, str, JSON]]:
    """A documentation server (FastMCP 2, titles kept): long docstrings, few parameters."""
    fields: dict[str, tuple[JSON, str]] = {
        "search_phrase": (STR, "Words to search the documentation for"),
        "limit": (bounded(10, 1, 50), "Most results to return"),
        "url": (STR, "Address of a documentation page on the documentation site"),
        "max_length": (bounded(5000, 1, 1000000), "Longest answer, in characters"),
        "start_index": ({"default": 0, "minimum": 0, "type": "integer"}, "Character to start at"),
        "service": (nullable(STR), "Only list pages of this service"),
    }
    tools = [
        (
            "search_documentation",
            "Search the cloud provider's documentation with its own search index.\n\n"
            "## Usage\nUse specific technical terms rather than sentences: service names, API "
            "operation names, configuration keys, error codes. Put exact phrases in quotes. "
            "Results are ranked by relevance; each has the page URL, its title and a short "
            "context snippet.\n\n## Search tips\n- Start with a narrow query, widen it if "
            "nothing useful comes back.\n- Include the service name to avoid pages about "
            "similarly named features of other services.\n- For errors, search the exact error "
            "code first, then its message.\n\n## Result interpretation\nRead the most relevant "
            "pages with read_documentation before you answer; snippets are too short to rely "
            "on.",
            ["search_phrase", "limit"],
            "A list of results with rank, URL, title and context.",
        ),
        (
            "read_documentation",
            "Fetch a documentation page and convert it to markdown.\n\n## Usage\nPass the URL "
            "of a page on the documentation site; other hosts are refused. Long pages are "
            "returned in pieces: when the answer says it was cut, call again with start_index "
            "set to the index it gives, until you have what you need. You do not have to read "
            "the whole page.\n\n## Output format\nHeadings, lists, code blocks and tables are "
            "kept as markdown; navigation, scripts and page chrome are removed. Code samples "
            "keep their language tags so you can quote them accurately.\n\n## Handling long "
            "pages\nMany reference pages list every parameter of an API. Search the page for "
            "the parameter you need with a smaller max_length rather than reading it all.",
            ["url", "max_length", "start_index"],
            "The page as markdown, and where to continue if it was cut.",
        ),
        (
            "recommend",
            "List pages related to a documentation page: highly rated pages, new pages, pages "
            "people often read next, and pages similar to this one.\n\n## Usage\nUse it after "
            "reading a page to find material on the same topic, and especially to find pages "
            "about features that are newer than search results suggest: the 'new' list "
            "includes recently published pages.\n\n## Output\nEach recommendation has its URL, "
            "title, a short summary and the reason it was recommended.",
            ["url"],
            "Recommended pages grouped by reason.",
        ),
        (
            "get_available_services",
            "List the services the documentation covers, with their short names and the URL "
            "of each service's documentation home page.\n\n## Usage\nCall it when you are not "
            "sure how a service is named in the documentation, before searching. Pass service "
            "to check one name.",
            ["service"],
            "The services with names and home page URLs.",
        ),
    ]
    return [
        (
            name,
            fastmcp_docstring(summary, {n: fields[n][1] for n in names}, returns),
            fastmcp_titled(name, fields, names),
        )
        for name, summary, names, returns in tools
    ]


TRACKER_FIELDS: dict[str, tuple[JSON, str]] = {
    "issue_key": (STR, "Issue key, e.g. 'LEDGER-412'"),
    "issue_keys": (STRINGS, "Issue keys, e.g. ['LEDGER-412', 'LEDGER-413']"),
    "project_key": (STR, "Project key, e.g. 'LEDGER'"),
    "jql": (
        STR,
        "JQL query, e.g. 'project = LEDGER AND status = \"In Progress\" ORDER BY updated DESC'",
    ),
    "fields": (
        {"default": "summary,status,assignee,priority,updated", "type": "string"},
        "Comma-separated fields to return, or '*all' for every field",
    ),
    "expand": (nullable(STR), "Comma-separated parts to expand, e.g. 'renderedFields,changelog'"),
    "limit": (bounded(10, 1, 50), "Most results to return (1-50)"),
    "start_at": (
        {"default": 0, "minimum": 0, "type": "integer"},
        "Index of the first result, for paging",
    ),
    "comment_limit": (bounded(10, 0, 100), "How many of the newest comments to include"),
    "summary": (STR, "One-line summary of the issue"),
    "issue_type": (STR, "Issue type, e.g. 'Bug', 'Task', 'Story' or 'Epic'"),
    "description": (nullable(STR), "Description in Markdown; converted to the tracker's markup"),
    "assignee": (nullable(STR), "Assignee's email, display name or account id"),
    "components": (nullable(STR), "Comma-separated component names, e.g. 'api,billing'"),
    "additional_fields": (
        nullable(OBJECT),
        'Other fields as a JSON object, e.g. {"priority": {"name": "High"}, "labels": ["billing"]}',
    ),
    "update_fields": (
        OBJECT,
        'Fields to set as a JSON object, e.g. {"summary": "New '
        'title", "assignee": "ana@example.com"}',
    ),
    "attachments": (nullable(STRINGS), "Paths of files to attach"),
    "issues": (
        STR,
        "JSON array of issues, each with project_key, summary, issue_type and "
        "optional description, assignee and components",
    ),
    "validate_only": (
        {"default": False, "type": "boolean"},
        "Check the input without creating anything",
    ),
    "transition_id": (STR, "Id of the transition, as jira_get_transitions lists it"),
    "transition_comment": (nullable(STR), "Comment to add with the transition"),
    "resolution": (nullable(STR), "Resolution to set, e.g. 'Fixed' or \"Won't Do\""),
    "comment": (STR, "Comment text in Markdown"),
    "comment_id": (STR, "Id of the comment"),
    "visibility": (
        nullable(OBJECT),
        'Restrict who sees it, e.g. {"type": "role", "value": "Developers"}',
    ),
    "time_spent": (STR, "Time spent in tracker notation, e.g. '1h 30m' or '2d'"),
    "started": (nullable(STR), "When the work started, ISO 8601; now when omitted"),
    "original_estimate": (nullable(STR), "New original estimate, e.g. '3d'"),
    "remaining_estimate": (nullable(STR), "New remaining estimate, e.g. '4h'"),
    "worklog_id": (STR, "Id of the worklog entry"),
    "epic_key": (STR, "Key of the epic, e.g. 'LEDGER-100'"),
    "link_type": (STR, "Link type name, e.g. 'Blocks', 'Relates' or 'Duplicate'"),
    "inward_issue_key": (STR, "Key of the issue on the inward side (e.g. the one that is blocked)"),
    "outward_issue_key": (STR, "Key of the issue on the outward side (e.g. the one that blocks)"),
    "link_id": (STR, "Id of the issue link"),
    "board_id": (STR, "Id of the agile board"),
    "board_name": (nullable(STR), "Part of the board's name to filter by"),
    "board_type": (nullable(STR), "'scrum' or 'kanban'"),
    "sprint_id": (STR, "Id of the sprint"),
    "sprint_name": (STR, "Name of the sprint, e.g. 'Ledger 24.18'"),
    "sprint_state": (nullable(STR), "Comma-separated states to include: active, future, closed"),
    "start_date": (nullable(STR), "Start date, ISO 8601"),
    "end_date": (nullable(STR), "End date, ISO 8601"),
    "goal": (nullable(STR), "Goal of the sprint, one sentence"),
    "version_id": (STR, "Id of the version"),
    "version_name": (STR, "Name of the version, e.g. '3.4.0'"),
    "release_date": (nullable(STR), "Release date, YYYY-MM-DD"),
    "versions": (
        STR,
        "JSON array of versions, each with name and optional startDate, "
        "releaseDate and description",
    ),
    "component_name": (STR, "Name of the component"),
    "lead": (nullable(STR), "Account id or email of the component lead"),
    "user_identifier": (STR, "User's email, display name or account id"),
    "query": (STR, "Text to search for"),
    "target_dir": (STR, "Directory to save the files in; created if missing"),
    "file_path": (STR, "Absolute path of the file to upload"),
    "attachment_id": (STR, "Id of the attachment"),
    "filter_id": (STR, "Id of the saved filter"),
    "filter_name": (STR, "Name of the saved filter"),
    "favourite": ({"default": False, "type": "boolean"}, "Mark the filter as a favourite"),
    "label": (STR, "Label, without spaces"),
    "story_points": ({"minimum": 0, "type": "number"}, "Estimate in story points"),
    "field_id": (STR, "Id of the custom field, e.g. 'customfield_10016'"),
    "url": (STR, "Address the link points to"),
    "title": (STR, "Title shown for the link"),
    "service_desk_id": (STR, "Id of the service desk"),
    "queue_id": (STR, "Id of the queue"),
    "request_type_id": (STR, "Id of the request type"),
    "request_fields": (
        OBJECT,
        'Field values of the request, e.g. {"summary": "VPN down", "description": "..."}',
    ),
    "due_date": (STR, "Due date, YYYY-MM-DD"),
    "rank_before": (nullable(STR), "Put the issues before this issue"),
    "rank_after": (nullable(STR), "Put the issues after this issue"),
    "target_project_key": (STR, "Key of the project to move the issue to"),
    "include_links": ({"default": True, "type": "boolean"}, "Copy the issue links as well"),
    "page_id": (STR, "Id of the page, e.g. '123456789'"),
    "space_key": (STR, "Key of the space, e.g. 'ENG'"),
    "page_title": (STR, "Title of the page"),
    "content": (STR, "Content of the page in the format given by content_format"),
    "content_format": (
        {"default": "markdown", "type": "string"},
        "'markdown', 'wiki' or 'storage'",
    ),
    "parent_id": (nullable(STR), "Id of the parent page; top level of the space when omitted"),
    "version_comment": (nullable(STR), "Note saved with the new version"),
    "is_minor_edit": ({"default": False, "type": "boolean"}, "Do not notify watchers"),
    "cql": (STR, "CQL query, e.g. 'type = page AND space = ENG AND text ~ \"retry\"'"),
    "include_metadata": (
        {"default": True, "type": "boolean"},
        "Include version, labels and ancestors",
    ),
    "convert_to_markdown": (
        {"default": True, "type": "boolean"},
        "Return the body as Markdown rather than storage format",
    ),
    "version": ({"minimum": 1, "type": "integer"}, "Version number of the page"),
    "from_version": ({"minimum": 1, "type": "integer"}, "Older version to compare"),
    "to_version": ({"minimum": 1, "type": "integer"}, "Newer version to compare"),
    "body": (STR, "Comment text in Markdown"),
    "target_parent_id": (nullable(STR), "Id of the new parent page"),
    "target_space_key": (nullable(STR), "Key of the space to move or copy into"),
    "restrictions": (
        OBJECT,
        'Who may read and edit, e.g. {"read": {"group": '
        '["finance"]}, "update": {"user": ["ana@example.com"]}}',
    ),
    "template_id": (STR, "Id of the template"),
    "task_id": (STR, "Id of the inline task"),
    "depth": (bounded(1, 1, 5), "How many levels of children to include"),
    "space_name": (STR, "Name of the space"),
    "space_type": ({"default": "global", "type": "string"}, "'global' or 'personal'"),
}

# (tool, summary, parameters, what it returns), in the order the server registers them.
TRACKER_TOOLS: list[tuple[str, str, list[str], str]] = [
    (
        "jira_get_user_profile",
        "Get a user's profile: display name, email, account id, time zone "
        "and whether the account is active.",
        ["user_identifier"],
        "JSON with the user's profile.",
    ),
    (
        "jira_search_users",
        "Find users by name or email, e.g. to get the account id for an assignee.",
        ["query", "limit"],
        "JSON list of matching users.",
    ),
    (
        "jira_get_issue",
        "Get one issue with the fields you ask for, its comments and, when "
        "expanded, its rendered fields or history.",
        ["issue_key", "fields", "expand", "comment_limit"],
        "JSON with the issue's key, fields and comments.",
    ),
    (
        "jira_search",
        "Search issues with JQL. Use it for any question about several issues: "
        "open bugs of a project, issues assigned to someone, what changed this week.",
        ["jql", "fields", "limit", "start_at", "expand"],
        "JSON with the total and a page of issues.",
    ),
    (
        "jira_search_fields",
        "Find field ids by name, e.g. the custom field that holds story points.",
        ["query", "limit"],
        "JSON list of fields with id, name and type.",
    ),
    (
        "jira_get_project_issues",
        "List the issues of one project, newest first.",
        ["project_key", "limit", "start_at"],
        "JSON with the total and a page of issues.",
    ),
    (
        "jira_get_transitions",
        "List the workflow transitions an issue can take now, with their ids and target statuses.",
        ["issue_key"],
        "JSON list of transitions.",
    ),
    (
        "jira_transition_issue",
        "Move an issue to another status through a workflow transition, "
        "optionally with a comment and a resolution.",
        ["issue_key", "transition_id", "transition_comment", "resolution"],
        "JSON with the issue's new status.",
    ),
    (
        "jira_create_issue",
        "Create an issue. Check the project's issue types first if you are not sure which exist.",
        [
            "project_key",
            "summary",
            "issue_type",
            "description",
            "assignee",
            "components",
            "additional_fields",
        ],
        "JSON with the new issue's key and URL.",
    ),
    (
        "jira_batch_create_issues",
        "Create several issues in one call.",
        ["issues", "validate_only"],
        "JSON list with the key of each created issue, or its errors.",
    ),
    (
        "jira_update_issue",
        "Change fields of an issue and optionally add attachments.",
        ["issue_key", "update_fields", "additional_fields", "attachments"],
        "JSON with the issue as it is now.",
    ),
    (
        "jira_delete_issue",
        "Delete an issue and its sub-tasks. This cannot be undone.",
        ["issue_key"],
        "A confirmation message.",
    ),
    (
        "jira_add_comment",
        "Add a comment to an issue.",
        ["issue_key", "comment", "visibility"],
        "JSON with the new comment's id and author.",
    ),
    (
        "jira_edit_comment",
        "Replace the text of a comment.",
        ["issue_key", "comment_id", "comment"],
        "JSON with the updated comment.",
    ),
    (
        "jira_delete_comment",
        "Delete a comment.",
        ["issue_key", "comment_id"],
        "A confirmation message.",
    ),
    (
        "jira_get_comments",
        "List the comments of an issue, newest first.",
        ["issue_key", "limit", "start_at"],
        "JSON list of comments.",
    ),
    (
        "jira_add_worklog",
        "Log time spent on an issue and optionally change its estimates.",
        [
            "issue_key",
            "time_spent",
            "comment",
            "started",
            "original_estimate",
            "remaining_estimate",
        ],
        "JSON with the new worklog entry.",
    ),
    (
        "jira_get_worklog",
        "List the time logged on an issue.",
        ["issue_key"],
        "JSON list of worklog entries.",
    ),
    (
        "jira_delete_worklog",
        "Delete a worklog entry.",
        ["issue_key", "worklog_id"],
        "A confirmation message.",
    ),
    (
        "jira_link_to_epic",
        "Put an issue into an epic.",
        ["issue_key", "epic_key"],
        "JSON with the issue and its epic.",
    ),
    (
        "jira_get_epic_issues",
        "List the issues of an epic.",
        ["epic_key", "limit", "start_at"],
        "JSON list of issues.",
    ),
    (
        "jira_create_issue_link",
        "Link two issues, e.g. one blocks the other.",
        ["link_type", "inward_issue_key", "outward_issue_key", "comment"],
        "A confirmation message.",
    ),
    (
        "jira_remove_issue_link",
        "Remove a link between two issues.",
        ["link_id"],
        "A confirmation message.",
    ),
    (
        "jira_get_link_types",
        "List the issue link types with their inward and outward names.",
        [],
        "JSON list of link types.",
    ),
    (
        "jira_create_remote_link",
        "Link an issue to a web page, e.g. a pull request or a document.",
        ["issue_key", "url", "title"],
        "JSON with the new link's id.",
    ),
    (
        "jira_get_remote_links",
        "List the web links of an issue.",
        ["issue_key"],
        "JSON list of remote links.",
    ),
    (
        "jira_get_agile_boards",
        "List agile boards, optionally by project, name or type.",
        ["project_key", "board_name", "board_type", "limit", "start_at"],
        "JSON list of boards.",
    ),
    (
        "jira_get_board_issues",
        "List the issues on a board that match a JQL query.",
        ["board_id", "jql", "fields", "limit", "start_at"],
        "JSON list of issues.",
    ),
    (
        "jira_get_sprints_from_board",
        "List the sprints of a board.",
        ["board_id", "sprint_state", "limit", "start_at"],
        "JSON list of sprints.",
    ),
    (
        "jira_get_sprint_issues",
        "List the issues in a sprint.",
        ["sprint_id", "fields", "limit", "start_at"],
        "JSON list of issues.",
    ),
    (
        "jira_create_sprint",
        "Create a sprint on a board.",
        ["board_id", "sprint_name", "start_date", "end_date", "goal"],
        "JSON with the new sprint.",
    ),
    (
        "jira_update_sprint",
        "Change a sprint's name, dates or goal.",
        ["sprint_id", "sprint_name", "start_date", "end_date", "goal"],
        "JSON with the sprint as it is now.",
    ),
    (
        "jira_start_sprint",
        "Start a future sprint.",
        ["sprint_id", "start_date", "end_date"],
        "JSON with the started sprint.",
    ),
    (
        "jira_close_sprint",
        "Close an active sprint; its unfinished issues move to the backlog.",
        ["sprint_id"],
        "JSON with the closed sprint.",
    ),
    (
        "jira_move_issues_to_sprint",
        "Move issues into a sprint.",
        ["sprint_id", "issue_keys"],
        "A confirmation message.",
    ),
    (
        "jira_rank_issues",
        "Change the rank of issues on the board, before or after another issue.",
        ["issue_keys", "rank_before", "rank_after"],
        "A confirmation message.",
    ),
    (
        "jira_get_all_projects",
        "List the projects you can see.",
        ["limit", "start_at"],
        "JSON list of projects with key and name.",
    ),
    (
        "jira_get_project",
        "Get a project's details: lead, issue types, components and versions.",
        ["project_key"],
        "JSON with the project.",
    ),
    (
        "jira_get_project_versions",
        "List the versions of a project.",
        ["project_key"],
        "JSON list of versions.",
    ),
    (
        "jira_create_version",
        "Create a version in a project.",
        ["project_key", "version_name", "start_date", "release_date", "description"],
        "JSON with the new version.",
    ),
    (
        "jira_batch_create_versions",
        "Create several versions in one call.",
        ["project_key", "versions"],
        "JSON list of created versions, or their errors.",
    ),
    (
        "jira_release_version",
        "Mark a version as released.",
        ["version_id", "release_date"],
        "JSON with the released version.",
    ),
    (
        "jira_get_project_components",
        "List the components of a project.",
        ["project_key"],
        "JSON list of components.",
    ),
    (
        "jira_create_component",
        "Create a component in a project.",
        ["project_key", "component_name", "description", "lead"],
        "JSON with the new component.",
    ),
    (
        "jira_assign_issue",
        "Assign an issue to a user, or unassign it.",
        ["issue_key", "assignee"],
        "A confirmation message.",
    ),
    (
        "jira_add_watcher",
        "Add a watcher to an issue.",
        ["issue_key", "user_identifier"],
        "A confirmation message.",
    ),
    (
        "jira_remove_watcher",
        "Remove a watcher from an issue.",
        ["issue_key", "user_identifier"],
        "A confirmation message.",
    ),
    ("jira_get_watchers", "List the watchers of an issue.", ["issue_key"], "JSON list of users."),
    (
        "jira_download_attachments",
        "Download all attachments of an issue to a directory.",
        ["issue_key", "target_dir"],
        "JSON list of the files written.",
    ),
    (
        "jira_upload_attachment",
        "Attach a file to an issue.",
        ["issue_key", "file_path"],
        "JSON with the new attachment.",
    ),
    (
        "jira_delete_attachment",
        "Delete an attachment.",
        ["attachment_id"],
        "A confirmation message.",
    ),
    (
        "jira_get_issue_changelog",
        "Get the change history of an issue: who changed which field when.",
        ["issue_key", "limit", "start_at"],
        "JSON list of changes.",
    ),
    (
        "jira_batch_get_changelogs",
        "Get the change histories of several issues.",
        ["issue_keys", "fields", "limit"],
        "JSON with a list of changes per issue.",
    ),
    ("jira_get_priorities", "List the priorities with their ids.", [], "JSON list of priorities."),
    (
        "jira_get_statuses",
        "List the statuses of a project's workflows.",
        ["project_key"],
        "JSON list of statuses per issue type.",
    ),
    (
        "jira_get_issue_types",
        "List a project's issue types.",
        ["project_key"],
        "JSON list of issue types.",
    ),
    ("jira_get_labels", "List the labels in use.", ["limit", "start_at"], "JSON list of labels."),
    (
        "jira_add_label",
        "Add a label to an issue.",
        ["issue_key", "label"],
        "A confirmation message.",
    ),
    (
        "jira_remove_label",
        "Remove a label from an issue.",
        ["issue_key", "label"],
        "A confirmation message.",
    ),
    (
        "jira_get_filters",
        "List your saved filters and your favourite ones.",
        ["limit"],
        "JSON list of filters with their JQL.",
    ),
    (
        "jira_create_filter",
        "Save a JQL query as a filter.",
        ["filter_name", "jql", "description", "favourite"],
        "JSON with the new filter.",
    ),
    (
        "jira_get_filter_issues",
        "List the issues a saved filter finds.",
        ["filter_id", "fields", "limit", "start_at"],
        "JSON list of issues.",
    ),
    (
        "jira_get_dashboards",
        "List the dashboards you can see.",
        ["limit", "start_at"],
        "JSON list of dashboards.",
    ),
    (
        "jira_set_story_points",
        "Set an issue's story point estimate.",
        ["issue_key", "story_points"],
        "A confirmation message.",
    ),
    (
        "jira_get_custom_field_options",
        "List the allowed values of a select-type custom field.",
        ["field_id", "project_key"],
        "JSON list of options.",
    ),
    (
        "jira_clone_issue",
        "Copy an issue, with its fields and optionally its links, into the same project.",
        ["issue_key", "summary", "include_links"],
        "JSON with the new issue's key.",
    ),
    (
        "jira_move_issue",
        "Move an issue to another project; its key changes.",
        ["issue_key", "target_project_key", "issue_type"],
        "JSON with the issue's new key.",
    ),
    (
        "jira_bulk_transition",
        "Apply the same transition to several issues.",
        ["issue_keys", "transition_id", "transition_comment"],
        "JSON with the result per issue.",
    ),
    (
        "jira_get_time_tracking",
        "Get an issue's estimates and logged time.",
        ["issue_key"],
        "JSON with original, remaining and spent time.",
    ),
    (
        "jira_set_due_date",
        "Set an issue's due date.",
        ["issue_key", "due_date"],
        "A confirmation message.",
    ),
    (
        "jira_get_service_desk_queues",
        "List the queues of a service desk.",
        ["service_desk_id"],
        "JSON list of queues with their issue counts.",
    ),
    (
        "jira_get_queue_issues",
        "List the requests in a service desk queue.",
        ["service_desk_id", "queue_id", "limit", "start_at"],
        "JSON list of requests.",
    ),
    (
        "jira_create_customer_request",
        "Raise a service desk request on a customer's behalf.",
        ["service_desk_id", "request_type_id", "request_fields"],
        "JSON with the new request's key.",
    ),
    (
        "jira_get_request_sla",
        "Get the SLA timers of a service desk request.",
        ["issue_key"],
        "JSON list of SLAs with their remaining time.",
    ),
    (
        "wiki_search",
        "Search pages and blog posts with CQL, or with plain words, which are "
        "matched against titles and text.",
        ["cql", "limit", "start_at"],
        "JSON list of results with id, title, space and excerpt.",
    ),
    (
        "wiki_get_page",
        "Get a page's content and metadata.",
        ["page_id", "include_metadata", "convert_to_markdown"],
        "JSON with the page's title, body and metadata.",
    ),
    (
        "wiki_get_page_children",
        "List the child pages of a page.",
        ["page_id", "depth", "limit", "start_at"],
        "JSON list of child pages.",
    ),
    (
        "wiki_get_page_ancestors",
        "List the ancestors of a page, from the top of the space down.",
        ["page_id"],
        "JSON list of pages.",
    ),
    (
        "wiki_create_page",
        "Create a page in a space, optionally under a parent page.",
        ["space_key", "page_title", "content", "parent_id", "content_format"],
        "JSON with the new page's id and URL.",
    ),
    (
        "wiki_update_page",
        "Replace a page's title and content; a new version is saved.",
        ["page_id", "page_title", "content", "is_minor_edit", "version_comment", "content_format"],
        "JSON with the page's new version.",
    ),
    (
        "wiki_delete_page",
        "Move a page to the space's trash.",
        ["page_id"],
        "A confirmation message.",
    ),
    (
        "wiki_move_page",
        "Move a page under another parent or into another space.",
        ["page_id", "target_parent_id", "target_space_key"],
        "JSON with the page's new position.",
    ),
    (
        "wiki_copy_page",
        "Copy a page, optionally into another space.",
        ["page_id", "page_title", "target_parent_id", "target_space_key"],
        "JSON with the copy's id.",
    ),
    (
        "wiki_get_page_history",
        "List the versions of a page with authors and notes.",
        ["page_id", "limit", "start_at"],
        "JSON list of versions.",
    ),
    (
        "wiki_restore_page_version",
        "Make an old version of a page the current one.",
        ["page_id", "version", "version_comment"],
        "JSON with the page's new version.",
    ),
    (
        "wiki_compare_page_versions",
        "Show what changed between two versions of a page.",
        ["page_id", "from_version", "to_version"],
        "A unified diff of the two versions.",
    ),
    (
        "wiki_get_comments",
        "List the comments of a page, with replies.",
        ["page_id", "limit", "start_at"],
        "JSON list of comments.",
    ),
    (
        "wiki_add_comment",
        "Add a comment to a page.",
        ["page_id", "body"],
        "JSON with the new comment.",
    ),
    (
        "wiki_reply_to_comment",
        "Reply to a comment.",
        ["comment_id", "body"],
        "JSON with the reply.",
    ),
    (
        "wiki_resolve_comment",
        "Mark an inline comment as resolved.",
        ["comment_id"],
        "A confirmation message.",
    ),
    ("wiki_get_labels", "List the labels of a page.", ["page_id"], "JSON list of labels."),
    (
        "wiki_add_label",
        "Add a label to a page.",
        ["page_id", "label"],
        "JSON list of the page's labels.",
    ),
    (
        "wiki_remove_label",
        "Remove a label from a page.",
        ["page_id", "label"],
        "A confirmation message.",
    ),
    (
        "wiki_get_attachments",
        "List the files attached to a page.",
        ["page_id", "limit", "start_at"],
        "JSON list of attachments.",
    ),
    (
        "wiki_upload_attachment",
        "Attach a file to a page.",
        ["page_id", "file_path"],
        "JSON with the new attachment.",
    ),
    (
        "wiki_download_attachment",
        "Download an attachment to a directory.",
        ["attachment_id", "target_dir"],
        "The path of the file written.",
    ),
    (
        "wiki_get_spaces",
        "List the spaces you can see.",
        ["limit", "start_at"],
        "JSON list of spaces with key and name.",
    ),
    (
        "wiki_get_space",
        "Get a space's details and its home page.",
        ["space_key"],
        "JSON with the space.",
    ),
    (
        "wiki_create_space",
        "Create a space.",
        ["space_key", "space_name", "description", "space_type"],
        "JSON with the new space.",
    ),
    (
        "wiki_get_space_permissions",
        "List who may do what in a space.",
        ["space_key"],
        "JSON list of permissions.",
    ),
    (
        "wiki_get_page_restrictions",
        "Get who may read and edit a page.",
        ["page_id"],
        "JSON with the read and update restrictions.",
    ),
    (
        "wiki_set_page_restrictions",
        "Replace who may read and edit a page.",
        ["page_id", "restrictions"],
        "JSON with the restrictions as they are now.",
    ),
    ("wiki_search_user", "Find users by name or email.", ["query", "limit"], "JSON list of users."),
    (
        "wiki_get_user_contributions",
        "List the pages a user created or edited recently.",
        ["user_identifier", "limit"],
        "JSON list of pages.",
    ),
    (
        "wiki_export_page_pdf",
        "Export a page as a PDF file.",
        ["page_id", "target_dir"],
        "The path of the file written.",
    ),
    (
        "wiki_get_templates",
        "List the page templates of a space.",
        ["space_key"],
        "JSON list of templates.",
    ),
    (
        "wiki_create_from_template",
        "Create a page from a template.",
        ["space_key", "template_id", "page_title", "parent_id"],
        "JSON with the new page's id and URL.",
    ),
    (
        "wiki_get_blog_posts",
        "List the blog posts of a space, newest first.",
        ["space_key", "limit", "start_at"],
        "JSON list of blog posts.",
    ),
    (
        "wiki_create_blog_post",
        "Publish a blog post in a space.",
        ["space_key", "page_title", "content", "content_format"],
        "JSON with the new post's id and URL.",
    ),
    (
        "wiki_watch_page",
        "Watch a page to be notified of changes.",
        ["page_id"],
        "A confirmation message.",
    ),
    ("wiki_unwatch_page", "Stop watching a page.", ["page_id"], "A confirmation message."),
    (
        "wiki_get_page_views",
        "Get how often a page was viewed, and by how many people.",
        ["page_id"],
        "JSON with view counts.",
    ),
    (
        "wiki_get_tasks",
        "List the inline tasks of a page or assigned to a user.",
        ["page_id", "user_identifier", "limit"],
        "JSON list of tasks.",
    ),
    (
        "wiki_complete_task",
        "Mark an inline task as complete.",
        ["task_id"],
        "A confirmation message.",
    ),
]

WRITES = (
    "create",
    "update",
    "delete",
    "add",
    "remove",
    "transition",
    "link",
    "move",
    "rank",
    "release",
    "assign",
    "upload",
    "set",
    "clone",
    "close",
    "start",
    "edit",
    "restore",
    "reply",
    "resolve",
    "watch",
    "complete",
    "copy",
)
TRACKER_NOTE = (
    "\n\nThe tracker and wiki are reached with the credentials the server was started with; "
    "results show only what that account may see, and a project or space the account cannot "
    "read looks as if it did not exist. Dates and times in answers are in UTC, ISO 8601; "
    "users are shown by display name and account id."
)
PAGING_NOTE = (
    "\n\nResults come in pages of at most limit entries. When the answer says that more are "
    "available, call again with start_at advanced by limit; stop as soon as you have what "
    "you need rather than reading every page."
)
JQL_NOTE = (
    '\n\nJQL tips: quote values that contain spaces (status = "In Progress"), use '
    "currentUser() for the account's own issues, relative dates such as -7d for the last "
    "week, and ORDER BY to get the most relevant issues first. An invalid query is answered "
    "with the parser's error message; fix the query rather than retrying it."
)
WRITE_NOTE = (
    "\n\nChanges are made in the name of the server's account and appear in the history "
    "under it. Before you change something the user did not mention, ask; changes notify "
    "watchers and cannot always be undone."
)
CONTENT_NOTE = (
    "\n\nMarkdown is converted to the wiki's storage format: headings, lists, tables, code "
    "blocks with a language and links survive; raw HTML does not. Use content_format "
    "'storage' to send storage format unchanged, e.g. for macros."
)


def tracker_server() -> list[tuple[str, str, JSON]]:
    """An issue tracker and wiki server (FastMCP, titles stripped), docstrings in Google style."""
    out = []
    for name, summary, names, returns in TRACKER_TOOLS:
        verb = name.split("_")[1]
        raises = "ValueError: when the server runs read-only." if verb in WRITES else ""
        args = {n: TRACKER_FIELDS[n][1] for n in names}
        notes = TRACKER_NOTE
        notes += PAGING_NOTE if "start_at" in names else ""
        notes += JQL_NOTE if "jql" in names else ""
        notes += WRITE_NOTE if raises else ""
        notes += CONTENT_NOTE if "content" in names else ""
        text = fastmcp_docstring(summary + notes, args, returns, raises)
        out.append((name, text, fastmcp_untitled(TRACKER_FIELDS, names)))
    return out


MCP_SERVERS: dict[str, Callable[[], list[tuple[str, str, JSON]]]] = {
    "demo": demo_server,
    "docs": docs_server,
    "fetch": fetch_server,
    "files": files_server,
    "git": git_server,
    "memory": memory_server,
    "sheets": sheets_server,
    "thinking": thinking_server,
    "time": time_server,
    "tracker": tracker_server,
}


def mcp_tools() -> list[dict[str, JSON]]:
    """Every MCP tool as Claude Code forwards it, sorted by its full name."""
    tools = [
        forwarded(server, name, description, schema)
        for server, build in MCP_SERVERS.items()
        for name, description, schema in build()
    ]
    return sorted(tools, key=lambda tool: tool["name"])


CLAUDE_CODE_ENV = """\
Here is useful information about the environment you are running in:
<env>
Working directory: /home/dev/ledger
Is directory a git repo: Yes
Platform: linux
Shell: bash
OS Version: Linux 6.8.0-49-generic
</env>
You are powered by a large language model.

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
e17f6a9 Split totals into rounding.py and totals.py"""

CLAUDE_CODE_SYSTEM = [
    {
        "type": "text",
        "text": "x-anthropic-billing-header: cc_version=2.1.197.000; cc_entrypoint=sdk-cli;",
    },
    {
        "type": "text",
        "text": "You are a command-line coding agent that helps people with software work.",
        "cache_control": {"type": "ephemeral"},
    },
    {
        "type": "text",
        "text": "\nYou are an interactive agent that helps users with software engineering "
        "tasks. Use the instructions below and the tools available to you to assist the user."
        "\n\n"
        + guide("safety", "style", "conventions", "tasks", "editing", "secrets", "output")
        + "\n\n"
        + CLAUDE_CODE_ENV,
        "cache_control": {"type": "ephemeral"},
    },
]

AGENT_TYPES = """\
Agent types you can start with the Agent tool:
- general-purpose: Researches open questions, searches code and carries out multi-step tasks. \
Use it when you are looking for a keyword or a file and are not sure the first few searches \
will find it. (Tools: *)
- Explore: Read-only agent for wide searches — many files, directories or naming conventions \
— when you only need its conclusion, not the file contents. Say how thorough it should be: \
"quick", "medium" or "very thorough". (Tools: all except Agent, Edit, Write, NotebookEdit)
- Plan: Designs an implementation for a change: which files to touch, in which order, what \
to test and what could go wrong. It never edits files. (Tools: all except Agent, Edit, Write, \
NotebookEdit)
- code-reviewer: Reviews a finished change against the project's conventions and reports \
bugs, missing tests and risky edits, most serious first. Use it after you have written or \
changed a meaningful amount of code. (Tools: Read, Bash, ReportFindings)
- test-runner: Runs the relevant test suites for a change, reads the failures and proposes \
minimal fixes without applying them. (Tools: Bash, Read)
- docs-writer: Writes or updates README sections, docstrings and changelog entries that match \
a change, in the project's existing voice. (Tools: Read, Write, Edit, Bash)
- security-auditor: Reads a change or a module with an attacker's eyes: injection, path \
traversal, unsafe deserialization, secrets in code or logs, missing authorization checks, and \
dependencies with known advisories. Reports findings with file:line, severity and a concrete \
fix. Use it proactively when a change touches authentication, file uploads, shell commands or \
anything parsing untrusted input. (Tools: Read, Bash, WebFetch, ReportFindings)
- perf-investigator: Profiles a slow code path, reads the profile and proposes the smallest \
change with the largest effect, with before-and-after numbers measured in the same run. Use \
it when the user says something is slow and nobody knows why yet. (Tools: Bash, Read, Write)
- migration-planner: Plans a large mechanical change — a framework upgrade, a renamed \
module, a replaced library — by listing every affected call site, grouping them into safe \
steps and saying what must be tested after each step. It never edits code. (Tools: Read, \
Bash)
- dependency-updater: Updates one dependency at a time, reads its changelog for breaking \
changes, adapts the code and runs the tests after each update. Use it when the user asks to \
bring dependencies up to date. (Tools: *)
- statusline-setup: Configures the terminal status line from the user's settings. (Tools: \
Read, Edit)

When you start an agent, give it a prompt that stands on its own: the goal, what you already \
know, what it may change and what its final message must contain. Agents cannot see this \
conversation.

Skills you can run with the Skill tool:
- release-notes: Turn merged pull request titles into user-facing release notes. Reads the \
merged pull requests since the last tag, groups them into features, fixes and internal \
changes, and writes one line per change in the project's changelog style.
- migration-review: Review a database migration for locking and rollback problems: table \
rewrites on large tables, missing concurrent index builds, irreversible data changes, and \
defaults that lock a table while they are written.
- explain-failure: Fetch a failed CI job's log and explain the first error, with the file and \
line it points at and the most likely cause.
- deps-audit: List outdated and vulnerable dependencies with upgrade notes: the current and \
latest version, whether the upgrade is major, and the advisories that apply.
- ledger-conventions: How money is handled in this repository: Decimal everywhere, rounding \
half-even at the line level, currency codes from ISO 4217, and which module owns which rule.

# Notes from MCP servers

Two connected servers sent instructions along with their tools:

## tracker
Issue keys look like PROJECT-NUMBER. Use jira_search with JQL for questions about several \
issues, and jira_get_issue for one. Wiki pages are addressed by id; find ids with wiki_search.

## memory
Keep entities small: one per person, service or decision, with short observations. Search \
before you create, so that the graph does not fill with duplicates."""

REMINDER = (
    "<system-reminder>\nContext for this session, to use where it helps:\n# currentDate\n"
    "Today is 2026-12-01.\n\n      Mention this context only when it matters for the "
    "user's request; otherwise leave it unmentioned.\n</system-reminder>\n\n"
)

LISTING = """\
total 64
drwxr-xr-x 7 dev dev 4096 Dec  1 09:12 .
drwxr-xr-x 5 dev dev 4096 Nov 28 17:40 ..
drwxr-xr-x 8 dev dev 4096 Dec  1 09:12 .git
-rw-r--r-- 1 dev dev  412 Nov 20 11:03 .gitignore
-rw-r--r-- 1 dev dev   12 Nov 20 11:03 .python-version
-rw-r--r-- 1 dev dev 2210 Nov 27 16:55 README.md
drwxr-xr-x 2 dev dev 4096 Nov 30 10:21 notes
-rw-r--r-- 1 dev dev 1184 Nov 27 16:55 pyproject.toml
drwxr-xr-x 3 dev dev 4096 Nov 20 11:03 src
drwxr-xr-x 2 dev dev 4096 Nov 29 14:37 tests
-rw-r--r-- 1 dev dev 9617 Nov 27 16:55 uv.lock"""

CLAUDE_CODE_METADATA = {
    "user_id": json.dumps(
        {
            "device_id": "5f0c2a9e7b1d4c38a6e0f2b9d7c4e1a3b8f6d2c0e9a7b5c3d1f4e2a0b9c8d7e6",
            "account_uuid": "",
            "session_id": "0b7e3c1a-6d2f-4e9b-8a5c-3f1d7e2b9c04",
        },
        separators=(",", ":"),
    )
}


def claude_code_body(
    messages: list[JSON], tools: list[JSON], model: str = "claude-opus-4-8"
) -> dict[str, JSON]:
    """The request body of Claude Code 2.1.197, keys in its order."""
    return {
        "model": model,
        "messages": messages,
        "system": CLAUDE_CODE_SYSTEM,
        "tools": tools,
        "metadata": CLAUDE_CODE_METADATA,
        "max_tokens": 64000,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "stream": True,
    }


def first_user_message(prompt: str, *, last: bool) -> JSON:
    """The opening user turn; the newest user block carries the cache breakpoint."""
    text: dict[str, JSON] = {"type": "text", "text": prompt}
    if last:
        text["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [{"type": "text", "text": REMINDER}, text]}


def claude_code_request() -> dict[str, JSON]:
    """The second request of `claude -p "list the files in this directory"`: after one Bash call."""
    messages = [
        first_user_message("list the files in this directory", last=False),
        {"role": "system", "content": AGENT_TYPES},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01HtXk4QmV9sPz2LcR7bN3aE",
                    "name": "Bash",
                    "input": {
                        "command": "ls -la",
                        "description": "List files in the current directory",
                    },
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01HtXk4QmV9sPz2LcR7bN3aE",
                    "content": LISTING,
                    "is_error": False,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]
    return claude_code_body(messages, [BUILTIN[name] for name in CLAUDE_CODE_TOOLS])


def claude_code_mcp_request() -> dict[str, JSON]:
    """The first request with ten MCP servers connected and tool search off (230 tools)."""
    messages = [
        first_user_message("list the files in this directory", last=True),
        {"role": "system", "content": AGENT_TYPES},
    ]
    tools = [BUILTIN[name] for name in CLAUDE_CODE_MCP_TOOLS] + mcp_tools()
    return claude_code_body(messages, tools)


FOUND = ["mcp__git__git_log", "mcp__git__git_show", "mcp__git__git_diff"]


def claude_code_tool_search_request() -> dict[str, JSON]:
    """The request after a ToolSearch call loaded three git tools: they come back in `tools`,
    sorted, with `defer_loading`, and the tool result refers to them in the order asked for."""
    every = {tool["name"]: tool for tool in mcp_tools()}
    deferred = [name for name in CLAUDE_CODE_MCP_TOOLS if name not in CLAUDE_CODE_LOADED]
    deferred += list(every)
    notice = (
        "These tools are deferred: their schemas are not loaded yet, and calling one before "
        "it is loaded fails with an input validation error. Load the ones you need with "
        'ToolSearch, by keywords or with "select:<name>[,<name>...]":\n'
        + "\n".join(deferred)
        + "\n\n"
    )
    search_id = "toolu_01Wq8JdL3nYc5Rv7Tb2Kx9Mf"
    messages = [
        first_user_message("which commits touched src/ledger/rounding.py last month?", last=False),
        {"role": "system", "content": notice + AGENT_TYPES},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": search_id,
                    "name": "ToolSearch",
                    "input": {"query": "select:" + ",".join(FOUND), "max_results": 5},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": search_id,
                    "content": [{"type": "tool_reference", "tool_name": name} for name in FOUND],
                },
                {"type": "text", "text": "Tools loaded.", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]
    tools = [BUILTIN[name] for name in CLAUDE_CODE_LOADED]
    tools += [{**every[name], "defer_loading": True} for name in sorted(FOUND)]
    return claude_code_body(messages, tools)


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


# OpenAI Chat Completions from a Python service: tools made with the OpenAI SDK's
# `pydantic_function_tool` (openai 3.57, pydantic 2.14), the body posted with `requests`'s
# `json=` (Python `json.dumps` defaults).


def openai_strict(schema: JSON) -> JSON:
    """What `pydantic_function_tool` does to a pydantic schema for strict mode: every object
    closed and all its properties required, `default: null` dropped."""
    if isinstance(schema, list):
        return [openai_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, JSON] = {}
    for key, value in schema.items():
        if key == "default" and value is None:
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: openai_strict(sub) for name, sub in value.items()}
        elif key in ("enum", "const", "examples", "default"):
            out[key] = value
        else:
            out[key] = openai_strict(value)
    if out.get("type") == "object":
        out.setdefault("additionalProperties", False)
        if "properties" in out:
            out["required"] = list(out["properties"])
    return out


def pydantic_function_tool(name: str, parameters: JSON) -> JSON:
    """`openai.pydantic_function_tool(Model)`: the model's docstring is the description."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "strict": True,
            "parameters": openai_strict(parameters),
            "description": parameters["description"],
        },
    }


DATE = {"format": "date", "type": "string"}


def openai_chat_tools() -> list[JSON]:
    state = {
        "enum": ["draft", "sent", "paid", "overdue", "void"],
        "title": "InvoiceState",
        "type": "string",
    }
    reason = {
        "enum": ["return", "discount", "correction", "goodwill"],
        "title": "CreditReason",
        "type": "string",
    }
    credit_line = model(
        "CreditLine",
        {
            "invoice_line": field("Invoice Line", INT, "Line of the original invoice"),
            "amount": field(
                "Amount",
                {"pattern": "^-?\\d+\\.\\d{2}$", "type": "string"},
                "Negative amount, two decimals",
            ),
            "note": optional("Note", STR),
        },
        ["invoice_line", "amount"],
    )
    return [
        pydantic_function_tool(
            "get_invoice",
            model(
                "GetInvoice",
                {
                    "invoice_id": field(
                        "Invoice Id",
                        STR,
                        "Invoice number such as INV-2025-0342",
                        examples=["INV-2025-0342"],
                    )
                },
                ["invoice_id"],
                description="Fetch one invoice with its lines, totals and payment state.",
            ),
        ),
        pydantic_function_tool(
            "search_invoices",
            model(
                "SearchInvoices",
                {
                    "customer": optional("Customer", STR),
                    "issued_after": optional("Issued After", DATE),
                    "issued_before": optional("Issued Before", DATE),
                    "state": {
                        "anyOf": [ref("InvoiceState"), {"type": "null"}],
                        "default": None,
                    },
                    "limit": field(
                        "Limit", {"default": 20, "maximum": 50, "minimum": 1, "type": "integer"}
                    ),
                },
                [],
                defs={"InvoiceState": state},
                description="Search invoices by customer, date range and state. Returns at "
                "most 50 summaries.",
            ),
        ),
        pydantic_function_tool(
            "create_credit_note",
            model(
                "CreateCreditNote",
                {
                    "invoice_id": field("Invoice Id", STR, "Invoice to credit"),
                    "reason": ref("CreditReason"),
                    "lines": field("Lines", {"items": ref("CreditLine"), "type": "array"}),
                    "notify_customer": field("Notify Customer", BOOL),
                },
                ["invoice_id", "reason", "lines", "notify_customer"],
                defs={"CreditLine": credit_line, "CreditReason": reason},
                description="Create a credit note against an issued invoice. Amounts are "
                "decimal strings in the invoice currency; every line must reference a line of "
                "the original invoice.",
            ),
        ),
        pydantic_function_tool(
            "convert_currency",
            model(
                "ConvertCurrency",
                {
                    "amount": field("Amount", STR, examples=["129.90"]),
                    "from_currency": field(
                        "From Currency", {"maxLength": 3, "minLength": 3, "type": "string"}
                    ),
                    "to_currency": field(
                        "To Currency", {"maxLength": 3, "minLength": 3, "type": "string"}
                    ),
                    "on": optional("On", DATE, "Rate date; today when omitted"),
                },
                ["amount", "from_currency", "to_currency"],
                description="Convert an amount between currencies at the European Central "
                "Bank reference rate of a given day.",
            ),
        ),
        pydantic_function_tool(
            "send_email",
            model(
                "SendEmail",
                {
                    "to": field("To", {"items": STR, "type": "array"}),
                    "subject": field("Subject", STR),
                    "body": field("Body", STR, "Plain text; markdown is not rendered"),
                    "attachments": field(
                        "Attachments", {"default": [], "items": STR, "type": "array"}
                    ),
                },
                ["to", "subject", "body"],
                description="Send an email from the billing mailbox. Attach documents by "
                "their ids.",
            ),
        ),
        pydantic_function_tool(
            "get_exchange_rates",
            model(
                "GetExchangeRates",
                {"day": field("Day", DATE, deprecated=True)},
                ["day"],
                description="Deprecated: use convert_currency. Lists reference rates for a day.",
            ),
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


# Codex CLI 0.171.0 (`codex exec`), Responses API over HTTP. Its schemas come from Rust types:
# properties sorted by name, `additionalProperties: false`, no annotation anywhere. With the
# default model the catalogue is not top-level: `input[0]` is an additional_tools item of
# namespaces; with `-m gpt-5.5` it is the top-level `tools`.


def codex_function(name: str, description: str, parameters: JSON) -> dict[str, JSON]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "strict": False,
        "parameters": parameters,
    }


def codex_object(properties: dict[str, JSON], required: tuple[str, ...] = ()) -> dict[str, JSON]:
    """A Codex parameters object: properties sorted, `required` only when something is."""
    schema: dict[str, JSON] = {
        "type": "object",
        "properties": {name: properties[name] for name in sorted(properties)},
    }
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def rust(type_: str, description: str, **extra: JSON) -> dict[str, JSON]:
    return {"type": type_, "description": description, **extra}


def codex_namespace(name: str, description: str, tools: list[JSON]) -> dict[str, JSON]:
    return {"type": "namespace", "name": name, "description": description, "tools": tools}


EXEC_DESCRIPTION = (
    """\
Runs JavaScript in a persistent Node.js cell to orchestrate your work: shell commands, file \
reads and edits, and calls to the other tools, composed with ordinary code. This is a \
FREEFORM tool: send the source as it is, not wrapped in JSON.

- A cell is evaluated as an async module. Top-level await works; the value of the last \
expression statement is returned, together with everything written with console.log.
- Variables and imports persist between calls in the same cell; start the source with a \
`// @exec: new` line to get a fresh cell.
- The global `tools` object exposes every function tool by name: `await tools.sleep({ \
duration_ms: 500 })`. Namespaced tools are reached through their namespace: `await \
tools.collaboration.list_agents({})`.
- `sh(command, { cwd, timeout_ms })` runs a shell command and resolves to `{ stdout, stderr, \
code }`; it never throws for a non-zero exit code, so check code yourself.
- `fs` is node:fs/promises, already imported. Prefer `applyPatch(text)` for edits: it takes \
the patch format below and reports which hunks applied.
- A cell that runs longer than yield_time_ms returns what it has printed so far and keeps \
running; continue reading its output with wait, or stop it with wait and terminate.
- Output is limited to max_output_tokens per call; long output is cut in the middle with a \
note saying how much was left out.

Patch format for applyPatch:

    *** Begin Patch
    *** Update File: src/ledger/rounding.py
    @@ def round_credit(amount: Decimal) -> Decimal:
    -    return -abs(amount).quantize(CENT, rounding=ROUND_HALF_UP)
    +    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)
    *** End Patch

Each hunk names a file with Add File, Delete File or Update File; Update hunks locate the \
change by an @@ line of context and the lines prefixed with a space, and may end with \
*** Move to: to rename the file.

Helpers available in every cell:
- `rg(pattern, { path, glob, ignoreCase })` searches file contents with ripgrep and resolves \
to `[{ path, line, text }]`; faster and more precise than parsing `sh("rg ...")` output.
- `files(glob)` lists paths matching a glob, relative to the workspace, ignored files left \
out.
- `read(path, { from, to })` resolves to the text of a file or a line range of it, and \
`readJson(path)` to a parsed JSON file.
- `diff()` resolves to the workspace's uncommitted changes as a unified diff, and \
`status()` to the output of `git status --porcelain` as `[{ status, path }]`.
- `log(value)` prints a value as formatted JSON; use it instead of console.log for objects.
- `parallel(fns, limit)` runs async functions with at most limit running at a time and \
resolves to their results in order; use it for many independent shell commands.

How to structure work in cells:
- Do one logical step per call, so that you can read its result before deciding the next \
one. Combine steps in one cell when they are mechanical and you already know what to do, \
for example running the same check over twenty files.
- Keep results small: filter and summarize in code rather than printing whole files or \
long command output. Print the few lines you need to decide, and counts for the rest.
- Variables from earlier calls are still there; reuse them instead of recomputing.
- A thrown error ends the call and shows its stack; catch errors you expect and print a \
short message instead.

Guidance for commands run through sh follows.

"""
    + guide(
        "sandbox",
        "long_running",
        "output",
        "tooling",
        "secrets",
        "debugging",
        "examples",
        "editing",
        "commits",
        "pull_requests",
    )
    + """

Examples of cells:

<example>
const { stdout } = await sh("git status --porcelain");
const changed = stdout.split("\\n").filter(Boolean).map((line) => line.slice(3));
for (const path of changed.filter((p) => p.endsWith(".py"))) {
  const { code, stderr } = await sh(`uv run ruff check ${path}`);
  if (code !== 0) console.log(path, stderr);
}
</example>

<example>
// @exec: new
const text = await fs.readFile("pyproject.toml", "utf8");
text.match(/requires-python = "([^"]+)"/)?.[1];
</example>"""
)

YIELD_FIELD = "How long to wait for output before returning, in milliseconds."
TOKENS_FIELD = "Most output tokens to return; the rest is cut from the middle."


def codex_default_namespaces() -> list[JSON]:
    """The catalogue of the default model: namespaces functions, clock and collaboration."""
    question = codex_object(
        {
            "header": rust("string", "A short label for the question, 12 characters at most."),
            "id": rust("string", "Stable id in snake_case, used to match the answer."),
            "options": rust(
                "array",
                "Two or three answers for the user to choose from. Put the one you recommend "
                "first and add '(Recommended)' to its label. Do not add an 'Other' option; the "
                "user can always type their own answer.",
                items=codex_object(
                    {
                        "description": rust("string", "What choosing it means, in one sentence."),
                        "label": rust("string", "The answer, in one to five words."),
                    },
                    ("label", "description"),
                ),
            ),
            "question": rust("string", "The question, in one sentence."),
        },
        ("id", "header", "question", "options"),
    )
    spawn = (
        "Starts a sub-agent that works on a task in parallel with you, with its own context "
        "and the same tools. It reports back with a message when it is done.\n\nUse sub-agents "
        "for work that can go on while you do something else, or that would fill your context "
        "with material you only need a summary of: a wide search, a second opinion on a "
        "design, a slow test run you want to read the failures of. Do not use them for a step "
        "you need the answer to before you can continue, or for edits to the same files you "
        "are editing.\n\ntask_name identifies the agent in list_agents and in the messages it "
        "sends; keep it short and descriptive. message is its whole brief: it cannot see this "
        "conversation, so say what to do, what you already know, which files matter, whether "
        "it may change files and what its final message must contain.\n\nfork_turns copies "
        "recent turns of this conversation into the agent's context instead, when the brief "
        "would otherwise repeat them: 'all', or a number of turns. model and reasoning_effort "
        "default to yours; choose a smaller model for wide, shallow work.\n\nAgents run until "
        "they finish or you stop them with interrupt_agent. Wait for their messages with "
        "wait_agent when you have nothing else to do; a message from an agent arrives as a "
        "user turn. At most six agents run at a time."
    )
    return [
        codex_namespace(
            "functions",
            "",
            [
                {
                    "type": "custom",
                    "name": "exec",
                    "description": EXEC_DESCRIPTION,
                    "format": {
                        "type": "grammar",
                        "syntax": "lark",
                        "definition": "\nstart: header? body\nheader: DIRECTIVE EOL\nbody: "
                        "CODE\n\nDIRECTIVE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/\nEOL: /\\r?\\n/\n"
                        "CODE: /[\\s\\S]+/\n",
                    },
                },
                codex_function(
                    "wait",
                    "Waits for more output from an exec cell that returned before it finished, "
                    "or stops it.\n\nCall it when a cell reported that it is still running. It "
                    "returns the output produced since the last call and whether the cell has "
                    "finished. Set terminate to stop a cell that is stuck or no longer needed; "
                    "its final output is returned once. Waiting on a finished cell returns at "
                    "once with its status.\n\nDo not call wait in a tight loop: give "
                    "yield_time_ms a value that matches how long the work should take, such as "
                    "30000 for a test suite.",
                    codex_object(
                        {
                            "cell_id": rust("string", "The cell that is still running."),
                            "max_tokens": rust("number", TOKENS_FIELD),
                            "terminate": rust("boolean", "Stop the cell instead of waiting."),
                            "yield_time_ms": rust("number", YIELD_FIELD + " Default 10000."),
                        },
                        ("cell_id",),
                    ),
                ),
                codex_function(
                    "request_user_input",
                    "Asks the user one to three multiple-choice questions and waits for the "
                    "answers.",
                    codex_object(
                        {
                            "questions": rust(
                                "array",
                                "The questions; one is best, three at most.",
                                items=question,
                            )
                        },
                        ("questions",),
                    ),
                ),
                codex_function(
                    "request_user_input_async",
                    "Asks the user questions without waiting for the answers: you keep "
                    "working, and the answers arrive as a user turn when the user gives them. "
                    "Use it for decisions that are not needed right away, such as a name or "
                    "a default you can change later; use request_user_input when you cannot go "
                    "on without the answer. Each question is shown with its options; the user "
                    "may also answer in their own words. Do not ask the same question twice "
                    "while an answer is pending.",
                    codex_object(
                        {
                            "questions": rust(
                                "array",
                                "The questions, each with a title and optional choices.",
                                items=codex_object(
                                    {
                                        "options": rust(
                                            "array",
                                            "Answers for the user to choose from. Keep them "
                                            "short, mutually exclusive and in the order you "
                                            "would recommend them; the user can still type "
                                            "another answer. Leave it out for a question that "
                                            "needs a free-form answer, such as a name or a "
                                            "path, and for yes/no questions with an obvious "
                                            "default.",
                                            items={"type": "string"},
                                            minItems=1,
                                        ),
                                        "title": rust(
                                            "string",
                                            "The question as the user sees it, in one "
                                            "sentence ending with a question mark.",
                                        ),
                                    },
                                    ("title",),
                                ),
                                minItems=1,
                            )
                        },
                        ("questions",),
                    ),
                ),
                codex_function(
                    "send_message_to_user_async",
                    "Sends the user a short message while you keep working: a progress update "
                    "on a long task, a heads-up that something will take longer than expected, "
                    "or a question you can wait for. The message is shown at once; you do not "
                    "get an answer back from this tool, and the user's reply, if any, arrives "
                    "as a new user turn. Use it sparingly, at most every few minutes, and not "
                    "for the final answer: end your turn with that as usual. Keep the message "
                    "to one or two sentences; no code blocks.",
                    codex_object(
                        {
                            "message": rust(
                                "string", "The update or question, one or two sentences."
                            )
                        },
                        ("message",),
                    ),
                ),
            ],
        ),
        codex_namespace(
            "clock",
            "Tools for reading and waiting on time.",
            [
                codex_function(
                    "sleep",
                    "Waits for a number of milliseconds, up to ten minutes. Use it to give a "
                    "server time to start or a remote job time to finish.",
                    codex_object(
                        {
                            "duration_ms": rust(
                                "number", "How long to wait, in milliseconds, 600000 at most."
                            )
                        },
                        ("duration_ms",),
                    ),
                )
            ],
        ),
        codex_namespace(
            "collaboration",
            "Tools for spawning and managing sub-agents.",
            [
                codex_function(
                    "followup_task",
                    "Gives an agent that has finished its task a new task, keeping what it "
                    "learned the first time. Cheaper than spawning a new agent for related "
                    "work. The agent starts working at once and reports back when done.",
                    codex_object(
                        {
                            "message": rust(
                                "string", "The new task, complete in itself.", encrypted=True
                            ),
                            "target": rust(
                                "string", "The agent's task_name or path, as list_agents shows it."
                            ),
                        },
                        ("target", "message"),
                    ),
                ),
                codex_function(
                    "interrupt_agent",
                    "Stops a running agent at its next step. It sends a final message saying "
                    "what it had done so far.",
                    codex_object(
                        {"target": rust("string", "The agent to stop, by task_name or path.")},
                        ("target",),
                    ),
                ),
                codex_function(
                    "list_agents",
                    "Lists the agents of this session with their status and last message.",
                    codex_object(
                        {
                            "path_prefix": rust(
                                "string",
                                "Only list agents under this path, e.g. '/root/review'.",
                            )
                        }
                    ),
                ),
                codex_function(
                    "send_message",
                    "Queues a message for an agent; it reads it at its next step.",
                    codex_object(
                        {
                            "message": rust(
                                "string", "The message, complete in itself.", encrypted=True
                            ),
                            "target": rust("string", "The receiving agent, by task_name or path."),
                        },
                        ("target", "message"),
                    ),
                ),
                codex_function(
                    "spawn_agent",
                    spawn,
                    codex_object(
                        {
                            "fork_turns": rust(
                                "string",
                                "Copy recent turns into the agent's context: 'all' or a number "
                                "of turns. Without it the agent starts with only message.",
                            ),
                            "message": rust(
                                "string", "The agent's brief, complete in itself.", encrypted=True
                            ),
                            "model": rust(
                                "string", "Model for the agent; yours when omitted, e.g. 'gpt-5.5'."
                            ),
                            "reasoning_effort": rust(
                                "string",
                                "Reasoning effort: 'low', 'medium' or 'high'; yours when omitted.",
                            ),
                            "task_name": rust(
                                "string",
                                "Short name for the agent and its task, e.g. 'review-tests'.",
                            ),
                        },
                        ("task_name", "message"),
                    ),
                ),
                codex_function(
                    "wait_agent",
                    "Waits until one of your agents sends a message, or the timeout passes, "
                    "and returns the messages that arrived. Use it when you have nothing else "
                    "to do until an agent reports; messages also arrive on their own as user "
                    "turns while you work. Returns at once if a message is already waiting.",
                    codex_object(
                        {
                            "timeout_ms": rust(
                                "number", "Longest wait in milliseconds; 300000 when omitted."
                            )
                        }
                    ),
                ),
            ],
        ),
    ]


PATCH_GRAMMAR = """\
start: open section+ close
open: "*** Begin Patch" NL
close: "*** End Patch" NL?

section: added | removed | changed
added: "*** Add File: " path NL plus_line+
removed: "*** Delete File: " path NL
changed: "*** Update File: " path NL rename? edit?

path: /(.+)/
plus_line: "+" /(.*)/ NL -> line

rename: "*** Move to: " path NL
edit: (anchor | diff_line)+ end_of_file?
anchor: ("@@" | "@@ " /(.+)/) NL
diff_line: ("+" | "-" | " ") /(.*)/ NL
end_of_file: "*** End of File" NL

%import common.NEWLINE -> NL
"""


def codex_gpt55_tools() -> list[JSON]:
    """The top-level catalogue with `-m gpt-5.5`: ten tools, two of them without a schema."""
    return [
        codex_function(
            "exec_command",
            "Runs a command in a pseudo-terminal and returns its output, or a session id to "
            "continue.",
            codex_object(
                {
                    "cmd": rust("string", "The shell command to run."),
                    "justification": rust(
                        "string", "Why the command needs to run outside the sandbox, one sentence."
                    ),
                    "login": rust("boolean", "Run the shell as a login shell (default true)."),
                    "max_output_tokens": rust(
                        "number", TOKENS_FIELD + " The default depends on the model's context."
                    ),
                    "prefix_rule": rust(
                        "array",
                        "With require_escalated: a command prefix, e.g. ['npm', 'run'], the "
                        "user may approve for the rest of the session.",
                        items={"type": "string"},
                    ),
                    "sandbox_permissions": rust(
                        "string",
                        "use_default runs in the sandbox; require_escalated asks the user to run "
                        "it outside.",
                        enum=["use_default", "require_escalated"],
                    ),
                    "shell": rust("string", "Shell binary to use; the user's shell when omitted."),
                    "tty": rust(
                        "boolean",
                        "Allocate a terminal, for programs that behave differently in one.",
                    ),
                    "workdir": rust("string", "Directory to run in; the session's when omitted."),
                    "yield_time_ms": rust(
                        "number", YIELD_FIELD + " The command keeps running after that."
                    ),
                },
                ("cmd",),
            ),
        ),
        codex_function(
            "write_stdin",
            "Writes characters to a running command's terminal and returns new output.",
            codex_object(
                {
                    "chars": rust(
                        "string",
                        "Characters to send; empty to only read new output. '\\u0003' is Ctrl-C.",
                    ),
                    "max_output_tokens": rust(
                        "number", TOKENS_FIELD + " The default depends on the model's context."
                    ),
                    "session_id": rust("number", "The session id exec_command returned."),
                    "yield_time_ms": rust(
                        "number",
                        YIELD_FIELD + " Use a longer wait for commands that print slowly, such "
                        "as builds that print only when a step ends.",
                    ),
                },
                ("session_id",),
            ),
        ),
        codex_default_namespaces()[0]["tools"][2],
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Edits files with a patch in the format the grammar below describes. "
            "FREEFORM: send the patch itself, not JSON.",
            "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR},
        },
        codex_function(
            "view_image",
            "Shows you an image from the local filesystem, e.g. a screenshot the user "
            "mentioned by path.",
            codex_object(
                {"path": rust("string", "Path of the image file, absolute or relative.")}, ("path",)
            ),
        ),
        codex_function(
            "get_goal",
            "Returns the goal of this thread, if one is set: its objective, status and how much "
            "of its token budget is left.",
            {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
        ),
        codex_function(
            "create_goal",
            "Sets a goal for this thread: an objective that outlives a single turn, so that "
            "you keep working towards it across turns until it is complete. Only set one when "
            "the user asks for ongoing work. A thread has at most one goal.",
            codex_object(
                {
                    "objective": rust(
                        "string",
                        "What the goal is, specific enough to tell when it is reached, e.g. "
                        "'all tests in tests/billing pass on Python 3.13'.",
                    ),
                    "token_budget": rust(
                        "integer", "Most tokens to spend on the goal; no limit when omitted."
                    ),
                },
                ("objective",),
            ),
        ),
        codex_function(
            "update_goal",
            "Changes the status of the thread's goal when the situation calls for it.\n\n"
            "Set complete when the objective is reached and you have verified it, e.g. by "
            "running the tests it names. Set blocked when you cannot make progress without the "
            "user: a decision only they can make, access you do not have, a requirement that "
            "contradicts another. Say in your message what blocks you. Set paused when the user "
            "asks you to stop working on the goal for now.\n\nDo not mark a goal complete "
            "because you ran out of ideas or budget; say so instead and leave it active. A "
            "completed goal cannot be reopened; create a new one.\n\nThe user sees every "
            "status change, with your last message as the reason.",
            codex_object(
                {
                    "status": rust(
                        "string",
                        "complete when the objective is reached and verified; blocked when you "
                        "need the user to continue; paused when the user asked you to stop for "
                        "now. An active goal stays active while you keep working on it, so do "
                        "not call this tool to report progress: tell the user in your message "
                        "instead. Give the reason in the same turn.",
                        enum=["complete", "blocked", "paused"],
                    )
                },
                ("status",),
            ),
        ),
        {
            "type": "tool_search",
            "execution": "client",
            "description": "# Tool discovery\n\nFinds tools that were not loaded at the start "
            "and makes the matching ones available for your next call. MCP servers' tools are "
            "deferred this way: search here for them by what they do, e.g. 'create jira issue', "
            "instead of listing MCP resources.",
            "parameters": codex_object(
                {
                    "limit": rust("number", "Most tools to return; 8 when omitted."),
                    "query": rust("string", "What the tool should do."),
                },
                ("query",),
            ),
        },
        {
            "type": "web_search",
            "external_web_access": False,
            "search_content_types": ["text", "image"],
        },
    ]


CODEX_PERSONA = """\
You are Codex, working as a coding agent in the user's terminal. The workspace is shared: \
finish what the user asks and leave it in a state they can review. Keep going on your own \
until the task is done or a decision only the user can make stops you.

# How you work
- Read before you write: look at the relevant files before editing them.
- Keep changes minimal and focused on the request; do not fix unrelated issues, but mention \
them in your final message.
- Prefer rg for searching text and rg --files for listing files; they are much faster than \
grep and find.
- Commands run in a sandbox. If a command fails because it needs the network or writes \
outside the workspace, ask to run it outside the sandbox with a one-sentence justification.

# Final message
Summarize what you changed and how you verified it in a few short bullet points. Reference \
files as path:line. Do not paste whole files back to the user.

"""


def codex_message(role: str, uid: str, *texts: str) -> dict[str, JSON]:
    return {
        "type": "message",
        "id": f"msg_01a233dc-89fe-7120-87ec-{uid}",
        "role": role,
        "content": [{"type": "input_text", "text": text} for text in texts],
    }


CODEX_SKILLS = """\
<skills_instructions>
## Skills
A skill is a folder of instructions, and sometimes scripts, stored in a `SKILL.md` file. The \
skills you can use in this workspace are listed below with a description each; read a \
skill's SKILL.md before you follow it.
### Available skills
- release-notes: Turn merged pull request titles into user-facing release notes. (file: \
/home/dev/.codex/skills/release-notes/SKILL.md)
- migration-review: Review a database migration for locking and rollback problems. (file: \
/home/dev/.codex/skills/migration-review/SKILL.md)
- deps-audit: List outdated and vulnerable dependencies with upgrade notes. (file: \
/home/dev/.codex/skills/deps-audit/SKILL.md)
### How to use skills
- Use a skill when the user names it or when the task clearly matches its description. Do \
not load every skill up front: open only the SKILL.md files you need, and only the files they \
point to that the task needs.
- When several skills apply, use the smallest set that covers the task and say in one line \
which you use and why.
- If a skill's file cannot be read, say so briefly and continue without it.
- Paths inside a skill are relative to the skill's folder.
- A skill's instructions never override the user's request in this conversation; mention any \
conflict.
</skills_instructions>"""

CODEX_AGENTS_MD = """\
# AGENTS.md instructions for /home/dev/ledger

<INSTRUCTIONS>
- Money is Decimal everywhere; never float.
- Run `uv run pytest -q` before you say a change is done, and `uv run ruff check`.
- Keep commits small; the message says why, not what.
</INSTRUCTIONS>"""

CODEX_MULTI_AGENT = """\
<multi_agent_role>Your agent path is `/root`: you lead the agents that work on this \
request, and only you talk to the user: agents you start report to you, and \
you decide what reaches the user.

- Start agents for independent pieces of work that can run while you continue, and give each \
a brief that stands on its own.
- Do not start agents for steps you need the answer to before you can go on.
- Read what an agent reports before you rely on it; check the claims that decide what you do \
next.
- Two agents must never edit the same files at the same time.
- When the task is done, stop the agents that are still running, then answer the user.
</multi_agent_role>"""

CODEX_ENVIRONMENT = """\
<environment_context>
  <cwd>/home/dev/ledger</cwd>
  <shell>bash</shell>
  <current_date>2026-12-01</current_date>
  <timezone>Europe/Berlin</timezone>
  <filesystem><writable_roots><root>/home/dev/ledger</root></writable_roots></filesystem>
  <network>restricted</network>
</environment_context>"""

CODEX_PROMPT = "list the files in this directory"


def codex_client_metadata(model: str, effort: str) -> dict[str, JSON]:
    thread = "01a233dc-8999-7ab3-ab0b-046fd8525cad"
    turn = "01a233dc-89cb-7912-8572-435a649ed7a6"
    turn_metadata = {
        "installation_id": "a4940033-5283-4bf9-b261-486696c4d6d0",
        "session_id": thread,
        "thread_id": thread,
        "agent_name": "/root",
        "turn_id": turn,
        "window_id": f"{thread}:0",
        "window_number": 0,
        "request_kind": "turn",
        "history_initialization": "new",
        "turn_trigger": "exec",
        "sandbox": "seccomp",
        "sandbox_mode": "read-only",
        "analytics_enabled": False,
        "model": model,
        "reasoning_effort": effort,
    }
    return {
        "session_id": thread,
        "thread_id": thread,
        "x-codex-window-id": f"{thread}:0",
        "turn_id": turn,
        "root_turn_id": turn,
        "x-codex-turn-metadata": json.dumps(turn_metadata, separators=(",", ":")),
        "x-codex-installation-id": "a4940033-5283-4bf9-b261-486696c4d6d0",
    }


def codex_request() -> dict[str, JSON]:
    """`codex exec PROMPT` with the default model: the catalogue rides in `input[0]`."""
    persona = CODEX_PERSONA + guide(
        "conventions",
        "tasks",
        "editing",
        "planning",
        "delegation",
        "sandbox",
        "long_running",
        "output",
        "tooling",
        "secrets",
        "debugging",
        "commits",
        "pull_requests",
        "safety",
        "style",
    )
    return {
        "model": "gpt-6.2-sol",
        "stream": True,
        "input": [
            {
                "type": "additional_tools",
                "id": "at_01a233dc-89fe-7120-87ec-af6cdd0030bb",
                "role": "developer",
                "tools": codex_default_namespaces(),
            },
            codex_message("developer", "af7110f1e440", persona),
            codex_message("developer", "af81b859d6ca", CODEX_SKILLS, CODEX_AGENTS_MD),
            codex_message("developer", "af9727bb005a", CODEX_MULTI_AGENT),
            codex_message(
                "developer",
                "afada8539109",
                "<multi_agent_mode>Start sub-agents only when the user or AGENTS.md asks for "
                "them, or when a task clearly splits into independent parts.</multi_agent_mode>",
            ),
            codex_message("user", "afb9ec721299", CODEX_ENVIRONMENT),
            codex_message("user", "8d46254f97a3", CODEX_PROMPT),
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "context": "all_turns"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a233dc-8999-7ab3-ab0b-046fd8525cad",
        "text": {"verbosity": "low"},
        "client_metadata": codex_client_metadata("gpt-6.2-sol", "low"),
    }


def codex_gpt55_request() -> dict[str, JSON]:
    """`codex exec -m gpt-5.5 PROMPT`: the catalogue is the top-level `tools`."""
    persona = CODEX_PERSONA + guide(
        "conventions",
        "tasks",
        "editing",
        "planning",
        "sandbox",
        "long_running",
        "output",
        "tooling",
        "secrets",
        "debugging",
        "commits",
        "pull_requests",
        "style",
    )
    return {
        "model": "gpt-5.5",
        "stream": True,
        "input": [
            codex_message("developer", "af7110f1e441", persona),
            codex_message("developer", "af81b859d6cb", CODEX_SKILLS, CODEX_AGENTS_MD),
            codex_message("user", "afb9ec72129a", CODEX_ENVIRONMENT),
            codex_message("user", "8d46254f97a4", CODEX_PROMPT),
        ],
        "tools": codex_gpt55_tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a233dc-bddb-7e20-9bce-403291b23e45",
        "text": {"verbosity": "low"},
        "client_metadata": codex_client_metadata("gpt-5.5", "medium"),
    }


# Gemini CLI 0.61.0 (`gemini -p`), streamGenerateContent. Every declaration uses
# `parametersJsonSchema`; the one annotation in the catalogue is the draft-07 `$schema` of
# activate_skill, a tool only yolo mode sends.

WAIT_FIELD = (
    "Set to true when this call must wait for the calls before it in the same turn to finish, "
    "because it depends on their results; calls without it may run in parallel with them."
)
GIT_IGNORE_FIELD = (
    "Leave out files that .gitignore excludes. Defaults to true; set it to false to look at "
    "build output or vendored code."
)
GEMINI_IGNORE_FIELD = "Leave out files that .geminiignore excludes. Defaults to true."


def gemini_declaration(name: str, description: str, schema: JSON) -> dict[str, JSON]:
    return {"name": name, "description": description, "parametersJsonSchema": schema}


def gemini_declarations() -> dict[str, dict[str, JSON]]:
    """Every declaration Gemini CLI can send, by name."""
    declarations = [
        gemini_declaration(
            "update_topic",
            "Sets the topic of the current part of the session, shown to the user as a "
            "heading, and a short summary of where the work stands.",
            {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "A heading of a few words."},
                    "summary": {
                        "type": "string",
                        "description": "Two or three sentences on what has been done in this "
                        "part and what comes next, written for a user who looks away and comes "
                        "back later. Plain text; no lists.",
                    },
                    "strategic_intent": {
                        "type": "string",
                        "description": "What you are trying to achieve now, in one sentence.",
                    },
                    "wait_for_previous": {"type": "boolean", "description": WAIT_FIELD},
                },
                "required": ["strategic_intent"],
            },
        ),
        gemini_declaration(
            "list_directory",
            "Lists the files and subdirectories directly inside a directory, optionally "
            "leaving out entries that match glob patterns.",
            {
                "type": "object",
                "properties": {
                    "dir_path": {"description": "The directory to list.", "type": "string"},
                    "ignore": {
                        "description": "Glob patterns to leave out.",
                        "items": {"type": "string"},
                        "type": "array",
                    },
                    "file_filtering_options": {
                        "description": "Whether to honour .gitignore and .geminiignore; both "
                        "are honoured by default.",
                        "type": "object",
                        "properties": {
                            "respect_git_ignore": {
                                "description": GIT_IGNORE_FIELD,
                                "type": "boolean",
                            },
                            "respect_gemini_ignore": {
                                "description": GEMINI_IGNORE_FIELD,
                                "type": "boolean",
                            },
                        },
                    },
                },
                "required": ["dir_path"],
            },
        ),
        gemini_declaration(
            "read_file",
            "Reads a file and returns its content. Text files can be read in slices with "
            "start_line and end_line, which is how to read large files: the answer says when "
            "a file was cut and which lines to ask for next. Images, audio and PDF files are "
            "returned as inline data the model can look at. Files that .gitignore or "
            ".geminiignore exclude are refused unless the user named them. Binary files of "
            "other kinds are not read; the answer says what kind of file it is. Paths are "
            "relative to the workspace root or absolute inside it.",
            {
                "type": "object",
                "properties": {
                    "file_path": {"description": "The file to read.", "type": "string"},
                    "start_line": {
                        "description": "First line to read, counting from 1; optional.",
                        "type": "integer",
                        "minimum": 1,
                    },
                    "end_line": {
                        "description": "Last line to read, inclusive; optional, to the end.",
                        "type": "integer",
                        "minimum": 1,
                    },
                },
                "required": ["file_path"],
            },
        ),
        gemini_declaration(
            "grep_search",
            "Searches file contents for a regular expression.",
            {
                "type": "object",
                "properties": {
                    "pattern": {
                        "description": "The regular expression to search for, e.g. "
                        "'def\\s+round_\\w+'. Searches are case-insensitive unless the pattern "
                        "contains an upper-case letter.",
                        "type": "string",
                    },
                    "dir_path": {
                        "description": "Directory to search in, relative to the workspace root "
                        "or absolute; the workspace root when omitted.",
                        "type": "string",
                    },
                    "include_pattern": {
                        "description": "Glob of files to search, e.g. '*.py' or "
                        "'src/**/*.{ts,tsx}'. All files that are not ignored when omitted. "
                        "Narrow it to keep results short.",
                        "type": "string",
                    },
                    "exclude_pattern": {
                        "description": "Glob of files to skip, e.g. '**/migrations/**'. "
                        "Applied after include_pattern; ignored files are always skipped.",
                        "type": "string",
                    },
                    "names_only": {
                        "description": "Return only the paths of files that match, not the "
                        "matching lines. Use it first to see how widespread something is.",
                        "type": "boolean",
                    },
                    "max_matches_per_file": {
                        "description": "Most matching lines to return per file; the rest are "
                        "counted but not shown. No limit when omitted.",
                        "type": "integer",
                        "minimum": 1,
                    },
                    "total_max_matches": {
                        "description": "Most matching lines to return in all; the answer says "
                        "when more were found. 100 when omitted.",
                        "type": "integer",
                        "minimum": 1,
                    },
                },
                "required": ["pattern"],
            },
        ),
        gemini_declaration(
            "glob",
            "Finds files whose paths match a glob pattern such as 'src/**/*.ts' and returns "
            "their absolute paths, most recently modified first. Use it when you know part of "
            "a file's name or its extension. Files that .gitignore or .geminiignore exclude are "
            "left out unless you say otherwise.",
            {
                "type": "object",
                "properties": {
                    "pattern": {
                        "description": "The glob pattern, e.g. '**/*.py' or 'docs/*.md'.",
                        "type": "string",
                    },
                    "dir_path": {
                        "description": "Directory to search in, relative to the workspace root "
                        "or absolute; the workspace root when omitted.",
                        "type": "string",
                    },
                    "case_sensitive": {
                        "description": "Match upper and lower case exactly. Defaults to false.",
                        "type": "boolean",
                    },
                    "respect_git_ignore": {"description": GIT_IGNORE_FIELD, "type": "boolean"},
                    "respect_gemini_ignore": {
                        "description": GEMINI_IGNORE_FIELD,
                        "type": "boolean",
                    },
                },
                "required": ["pattern"],
            },
        ),
        gemini_declaration(
            "replace",
            "Replaces text in a file. old_string must match the file exactly, whitespace and "
            "indentation included, with enough context around the change to be unique: "
            "usually a few lines before and after. new_string replaces it. When old_string "
            "occurs several times the call fails unless allow_multiple is set. An empty "
            "old_string creates a new file with new_string as its content. Read the file "
            "before you replace text in it; never guess its content.",
            {
                "type": "object",
                "properties": {
                    "file_path": {"description": "The file to change.", "type": "string"},
                    "instruction": {
                        "description": "What the change does and why, in one or two sentences, "
                        "e.g. 'Round credit notes half-even like invoices, so totals stop "
                        "drifting by a cent'.",
                        "type": "string",
                    },
                    "old_string": {
                        "description": "The exact text to replace, with a few lines of context "
                        "so that it is unique in the file. Copy it from the file; do not "
                        "retype it.",
                        "type": "string",
                    },
                    "new_string": {
                        "description": "The text to put in its place, with the same context "
                        "lines as old_string so that only the intended part changes. It must "
                        "keep the file valid: matching brackets, correct indentation, and "
                        "imports for any name it introduces.",
                        "type": "string",
                    },
                    "allow_multiple": {
                        "type": "boolean",
                        "description": "Replace every occurrence of old_string instead of "
                        "failing when there is more than one. Defaults to false.",
                    },
                },
                "required": ["file_path", "instruction", "old_string", "new_string"],
            },
        ),
        gemini_declaration(
            "write_file",
            "Writes content to a file, creating it and its parent directories if needed, and "
            "replacing it if it exists. The user sees a diff and may change it before it is "
            "written. Prefer replace for changes to part of an existing file; write the whole "
            "file only when most of it changes.",
            {
                "type": "object",
                "properties": {
                    "file_path": {"description": "The file to write.", "type": "string"},
                    "content": {
                        "description": "The complete content of the file; nothing is appended "
                        "or kept from before.",
                        "type": "string",
                    },
                },
                "required": ["file_path", "content"],
            },
        ),
        gemini_declaration(
            "web_fetch",
            "Fetches the web pages whose URLs appear in prompt and answers prompt using their "
            "content. Up to 20 URLs per call. Use it to read documentation, release notes or "
            "an issue the user linked. Pages behind a login cannot be read. Local and private "
            "addresses are fetched directly from this machine; public ones through the model "
            "provider. Say in prompt what to look for: 'Which options does the retry "
            "decorator on https://example.com/docs/retry accept?' gives a better answer than "
            "'summarize this page'.",
            {
                "type": "object",
                "properties": {
                    "prompt": {
                        "description": "The question to answer, with the URLs to fetch written "
                        "in it (http or https), e.g. 'What changed in https://example.com/"
                        "changelog for version 3?'",
                        "type": "string",
                    }
                },
                "required": ["prompt"],
            },
        ),
        gemini_declaration(
            "run_shell_command",
            "Runs a command with `bash -c` in the workspace and returns its output.\n\nThe "
            "result holds the command, the directory it ran in, its standard output and "
            "standard error, the exit code or the signal that ended it, and the ids of any "
            "background processes it started. Commands run in the user's environment, not in "
            "a sandbox, so explain commands that change files or system state before you run "
            "them, and never run a command that deletes data outside the project.\n\nUse it "
            "for builds, tests, package managers and version control. Prefer the file tools "
            "for reading, searching and editing files: their output is easier for the user to "
            "review.\n\nCommands that do not finish by themselves (servers, watchers) must run "
            "in the background: set is_background, then read their output with "
            "read_background_output. Interactive commands that wait for input cannot be used; "
            "pass the flags that make them non-interactive (--yes, -y, CI=1). Output longer "
            "than a few thousand lines is cut; narrow the command rather than reading more.",
            {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command to run with bash -c.",
                    },
                    "description": {
                        "type": "string",
                        "description": "What the command does and why, in one sentence. Shown "
                        "to the user while it runs and when they are asked to approve it.",
                    },
                    "dir_path": {
                        "type": "string",
                        "description": "Directory to run in, relative to the workspace root or "
                        "absolute inside the workspace. The workspace root when omitted. Never "
                        "use cd in the command instead.",
                    },
                    "is_background": {
                        "type": "boolean",
                        "description": "Run the command in the background and return at once "
                        "with its process id, for commands that do not exit by themselves: "
                        "servers, watchers, long builds you want to check on. Read its output "
                        "with read_background_output. Defaults to false.",
                    },
                    "delay_ms": {
                        "type": "integer",
                        "description": "With is_background: how long to wait before returning, "
                        "so that the first output (e.g. 'Listening on port 8000') is included. "
                        "Defaults to 200.",
                    },
                },
                "required": ["command"],
            },
        ),
        gemini_declaration(
            "list_background_processes",
            "Lists the background processes this session started, with their ids and states.",
            {
                "type": "object",
                "properties": {"wait_for_previous": {"type": "boolean", "description": WAIT_FIELD}},
            },
        ),
        gemini_declaration(
            "read_background_output",
            "Reads new output of a background process started by run_shell_command.",
            {
                "type": "object",
                "properties": {
                    "pid": {"type": "integer", "description": "The id run_shell_command returned."},
                    "lines": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Most lines to return, newest last. All new lines when "
                        "omitted.",
                    },
                    "delay_ms": {
                        "type": "integer",
                        "description": "How long to wait for new output before returning; "
                        "useful right after starting a process. Defaults to 0.",
                    },
                    "wait_for_previous": {"type": "boolean", "description": WAIT_FIELD},
                },
                "required": ["pid"],
            },
        ),
        gemini_declaration(
            "google_web_search",
            "Searches the web and answers the query from the results, citing the pages it "
            "used. Use it for information newer than your training, such as current versions, "
            "recent releases and changed APIs; say which parts of your answer come from the "
            "search. Results can be wrong or outdated: for anything that decides what you do "
            "next, read the cited page with web_fetch. Write specific queries that name the "
            "product and version.",
            {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "The search query, specific and with the product name, "
                        "e.g. 'pydantic 2.12 model_validator mode after changelog'.",
                    }
                },
                "required": ["query"],
            },
        ),
        gemini_declaration(
            "enter_plan_mode",
            "Switches to plan mode: read-only tools, and a plan for the user to approve before "
            "any change.",
            {
                "type": "object",
                "properties": {
                    "reason": {
                        "type": "string",
                        "description": "Why a plan is needed first, one sentence.",
                    }
                },
            },
        ),
        gemini_declaration(
            "invoke_agent",
            "Hands a task to a named sub-agent and returns its report.",
            {
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "description": "Which agent to run."},
                    "prompt": {
                        "type": "string",
                        "description": "The agent's whole brief: it cannot see this "
                        "conversation, so say what to do, what you already know, what it may "
                        "change and what its report must contain.",
                    },
                    "wait_for_previous": {"type": "boolean", "description": WAIT_FIELD},
                },
                "required": ["agent_name", "prompt"],
            },
        ),
        gemini_declaration(
            "activate_skill",
            "Loads a skill by name (available: 'release-notes', 'migration-review') and returns "
            "its instructions inside <activated_skill> tags. Use it when the task matches a "
            "skill's description in the <available_skills> list, and use the names exactly as "
            "listed there. Follow the loaded instructions for the rest of the task, unless the "
            "user asks for something else.",
            {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "enum": ["release-notes", "migration-review"],
                        "description": "The skill to load.",
                    }
                },
                "required": ["name"],
                "additionalProperties": False,
                "$schema": DRAFT_07,
            },
        ),
    ]
    return {declaration["name"]: declaration for declaration in declarations}


GEMINI_TOOLS = ["update_topic", "list_directory", "read_file", "grep_search", "glob"]
GEMINI_TOOLS += ["google_web_search", "enter_plan_mode", "invoke_agent"]
GEMINI_YOLO_TOOLS = ["update_topic", "list_directory", "read_file", "grep_search", "glob"]
GEMINI_YOLO_TOOLS += ["replace", "write_file", "web_fetch", "run_shell_command"]
GEMINI_YOLO_TOOLS += ["list_background_processes", "read_background_output"]
GEMINI_YOLO_TOOLS += ["google_web_search", "enter_plan_mode", "invoke_agent", "activate_skill"]

GEMINI_INTRO = """\
You are Gemini CLI, working in the user's terminal on their code. Get their software work \
done carefully and without wasted steps, by the rules below and with the tools you have.

# House rules
- Paths you pass to tools stay inside the workspace.
- Leave alone what you did not change: no reverting, reformatting or tidying of other code \
unless the user asks for it.
- When the user's request is ambiguous, ask one short question rather than guessing.

"""


def gemini_request(names: list[str], mode: str) -> dict[str, JSON]:
    """A first turn of `gemini -p PROMPT` (mode says how tool calls are approved)."""
    every = gemini_declarations()
    mode_line = f"You are running in **{mode}** mode.\n\n"
    context = (
        "<session_context>\nGemini CLI session. Context for this chat:\nToday's date is "
        "Tuesday, December 1, 2026.\nOperating system: linux\nTemporary directory: "
        "/home/dev/.gemini/tmp/ledger\n- **Workspace directories:**\n  - /home/dev/ledger\n"
        "- **Directory structure** (up to 200 entries):\n\n/home/dev/ledger/\n├───README.md\n"
        "├───pyproject.toml\n├───uv.lock\n├───notes/\n├───src/\n└───tests/\n\n</session_context>"
    )
    return {
        "contents": [
            {
                "parts": [{"text": context}, {"text": "list the files in this directory"}],
                "role": "user",
            }
        ],
        "systemInstruction": {
            "parts": [
                {
                    "text": GEMINI_INTRO
                    + mode_line
                    + guide(
                        "safety",
                        "conventions",
                        "tasks",
                        "editing",
                        "planning",
                        "delegation",
                        "sandbox",
                        "long_running",
                        "output",
                        "tooling",
                        "secrets",
                        "debugging",
                        "examples",
                        "commits",
                        "pull_requests",
                        "style",
                    )
                }
            ],
            "role": "user",
        },
        "tools": [{"functionDeclarations": [every[name] for name in names]}],
        "generationConfig": {
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "thinkingConfig": {"includeThoughts": True, "thinkingLevel": "HIGH"},
        },
    }


def gemini_default_request() -> dict[str, JSON]:
    return gemini_request(GEMINI_TOOLS, "default")


def gemini_yolo_request() -> dict[str, JSON]:
    return gemini_request(GEMINI_YOLO_TOOLS, "YOLO")


# Assembly, self-check and summary.

CAPTURES: dict[str, tuple[Callable[[], JSON], Callable[[JSON], bytes]]] = {
    "claude-code.anthropic.json": (claude_code_request, dumps_compact),
    "claude-code.mcp.anthropic.json": (claude_code_mcp_request, dumps_compact),
    "claude-code.tool-search.anthropic.json": (claude_code_tool_search_request, dumps_compact),
    "mcp-fastmcp.anthropic.json": (mcp_fastmcp_request, dumps_compact),
    "openai-chat.json": (openai_chat_request, dumps_python_default),
    "openai-responses.codex.json": (codex_request, dumps_compact),
    "openai-responses.codex-gpt-5.5.json": (codex_gpt55_request, dumps_compact),
    "gemini-cli.json": (gemini_default_request, dumps_compact),
    "gemini-cli.yolo.json": (gemini_yolo_request, dumps_compact),
}


def catalogue(body: JSON) -> list[JSON]:
    """The request's tool catalogue: top-level `tools`, or Codex's additional_tools item."""
    if "tools" in body:
        return list(body["tools"])
    return next(item["tools"] for item in body["input"] if item.get("type") == "additional_tools")


def leaf_tools(tools: list[JSON]) -> Iterator[JSON]:
    """Each callable tool: namespace members and Gemini declarations one by one."""
    for tool in tools:
        if tool.get("type") == "namespace":
            yield from tool["tools"]
        elif "functionDeclarations" in tool:
            yield from tool["functionDeclarations"]
        else:
            yield tool


def tool_schemas(body: JSON) -> Iterator[tuple[str, JSON]]:
    """(tool name, schema) for every tool schema in a request body. Freeform (`custom`) tools
    and hosted ones such as web_search have none."""
    for tool in leaf_tools(catalogue(body)):
        name = tool.get("name", tool.get("type"))
        if "function" in tool:
            yield tool["function"]["name"], tool["function"]["parameters"]
        for key in ("input_schema", "parameters", "parametersJsonSchema"):
            if key in tool:
                yield name, tool[key]


def check(name: str, body: JSON, data: bytes) -> None:
    """Fail loudly if a capture is not valid JSON or holds an invalid tool schema."""
    if json.loads(data) != body:
        raise SystemExit(f"{name}: does not round-trip through JSON")
    try:
        from jsonschema.validators import validator_for
    except ImportError:
        print(f"{name}: jsonschema not installed, schema check skipped", file=sys.stderr)
        return
    for tool_name, schema in tool_schemas(body):
        try:
            validator_for(schema).check_schema(schema)
        except Exception as error:
            raise SystemExit(f"{name}: tool {tool_name}: invalid schema: {error}") from error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'file':<40} {'bytes':>8} {'tools':>6} {'tools bytes':>12}")
    for name, (build, serialize) in CAPTURES.items():
        body = build()
        data = serialize(body)
        check(name, body, data)
        (args.out / name).write_bytes(data)
        tools = catalogue(body)
        count = sum(1 for _ in leaf_tools(tools))
        print(f"{name:<40} {len(data):>8} {count:>6} {len(serialize(tools)):>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
