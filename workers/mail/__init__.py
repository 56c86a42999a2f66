"""The employer's copy of an application (C8), sent by SMTP (C9): what it says
(`content`), its bytes (`mime`), and the connection it goes out on (`relay`)."""
