#!/bin/sh
echo script-ok
