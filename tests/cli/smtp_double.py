"""A real SMTP server on 127.0.0.1 for heartbeat's e-mail tests (tests/cli/smtp_double.rs).

The standard library's smtpd (Python 3.11 and older), with AUTH PLAIN added. Usage:
smtp_double.py DIR. It prints its port on the first line of stdout and exits when its
stdin closes. Every DATA it receives is saved as DIR/NNN.json: the envelope, the login,
the answer given, the raw message and its decoded headers and body. The first line of
DIR/answers, if there is one, is taken as the answer to the end of the next DATA (e.g.
"451 4.3.0 try again later"); otherwise the message is accepted.
"""

import base64
import email
import email.policy
import json
import os
import sys
import threading
import warnings

warnings.simplefilter("ignore", DeprecationWarning)
import asyncore  # noqa: E402
import smtpd  # noqa: E402

DIR = sys.argv[1]


def next_answer():
    path = os.path.join(DIR, "answers")
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    if not lines:
        return None
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines[1:]))
    return lines[0]


class Channel(smtpd.SMTPChannel):
    login = None

    def smtp_EHLO(self, arg):
        # smtpd's EHLO answer ends with "250 HELP": offer AUTH PLAIN before it.
        push = self.push

        def with_auth(line):
            if line == "250 HELP":
                push("250-AUTH PLAIN")
            push(line)

        self.push = with_auth
        try:
            super().smtp_EHLO(arg)
        finally:
            del self.push

    def smtp_AUTH(self, arg):
        words = arg.split()
        if len(words) != 2 or words[0].upper() != "PLAIN":
            self.push("504 5.5.4 only AUTH PLAIN with an initial response")
            return
        try:
            _, user, password = base64.b64decode(words[1]).decode().split("\0")
        except Exception:
            self.push("501 5.5.2 cannot decode AUTH PLAIN")
            return
        self.login = [user, password]
        self.push("235 2.7.0 Authentication successful")

    def smtp_MAIL(self, arg):
        self.smtp_server.login = self.login
        super().smtp_MAIL(arg)


class Server(smtpd.SMTPServer):
    channel_class = Channel
    login = None
    count = 0

    def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
        answer = next_answer()
        message = email.message_from_bytes(data, policy=email.policy.default)
        record = {
            "answer": answer or "250 OK",
            "mail_from": mailfrom,
            "rcpt_to": rcpttos,
            "login": self.login,
            "headers": [[k, str(v)] for k, v in message.items()],
            "body": message.get_content() if not message.is_multipart() else None,
            "raw": data.decode("utf-8", "replace"),
        }
        self.count += 1
        tmp = os.path.join(DIR, "%03d.tmp" % self.count)
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(DIR, "%03d.json" % self.count))
        return answer


def exit_when_stdin_closes():
    sys.stdin.read()
    os._exit(0)


server = Server(("127.0.0.1", 0), None, decode_data=False)
print(server.socket.getsockname()[1], flush=True)
threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
asyncore.loop(timeout=0.2)
