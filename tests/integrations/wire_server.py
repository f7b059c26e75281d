"""A scripted stdio 'server' for the proxy's wire tests: canned answers, odd but valid JSON."""

import json
import sys


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            sys.stdout.write(
                '{"jsonrpc": "2.0",  "method": "notifications/message", "params": '
                '{"level": "info", "data": "saw a notification"}}\n'
            )
        elif message["method"] == "tools/call":
            text = message["params"]["arguments"].get("say", "same")
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"content": [{"type": "text", "text": text}], "isError": False},
            }
            sys.stdout.write(json.dumps(reply) + "\n")
        else:
            request_id, method = json.dumps(message["id"]), message["method"]
            sys.stdout.write(
                f'{{"jsonrpc":"2.0", "id": {request_id}, '
                f'"result": {{"echo": "{method}", "x": [1, 2]}}}}\n'
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
