"""What tests share: the live stack, factories, fixtures for every test folder, the browser."""
